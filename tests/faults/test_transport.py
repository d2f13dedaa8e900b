"""What the transport reports when the link breaks at the worst moment, over
TCP and TLS, through the sync and the asyncio API: a write is never applied
twice, never reported "not applied" when it may have been, and never
reported "maybe applied" when it provably was not sent."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import webtier
from tests.faults.drivers import STANDALONE_FAULTS, Target
from tests.faults.figures import Figures
from tests.faults.runner import run
from tests.faults.servers import DURABLE, Certificate, start_server, stopped
from tests.faults.workloads import Counters, Sessions
from webtier.config import Config
from webtier.testing import RedisServer

pytestmark = [pytest.mark.faults, pytest.mark.slow]  # loads under faults: CI, not the quick run

NOW = 1_700_000_000


@pytest.fixture(params=["tcp", "tls"])
def server(request: pytest.FixtureRequest) -> Iterator[RedisServer]:
    tls: Certificate | None = None
    if request.param == "tls":
        tls = request.getfixturevalue("certificate")
    with start_server(tls=tls) as running:
        yield running


async def call(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value


@contextlib.asynccontextmanager
async def tier_on(server: RedisServer, api: str, prefix: str) -> Any:
    if api == "sync":
        client = webtier.connect(server.url)
        try:
            yield webtier.WebTier(client, Config(prefix=prefix))
        finally:
            webtier.disconnect(client)
    else:
        aclient = webtier.connect_async(server.url)
        try:
            yield webtier.AsyncWebTier(aclient, Config(prefix=prefix))
        finally:
            await aclient.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_write_after_a_restart_goes_on_a_new_connection_once(
    server: RedisServer, api: str
) -> None:
    # The kept connection was closed by the server that died: the write must
    # find that out before it is written, not report "maybe applied".
    async with tier_on(server, api, "re") as tier:
        await call(tier.counters.record("hits", now=NOW))
        server.kill()
        server.launch()  # empty: no persistence
        await asyncio.sleep(0.2)  # the closed socket's EOF reaches the client
        await call(tier.counters.record("hits", now=NOW))
        assert await call(tier.counters.get("hits", 1)) == [(NOW, 1)]


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["sync", "async"])
async def test_an_idempotent_write_cut_off_after_it_was_sent_is_maybe_applied(
    server: RedisServer, api: str
) -> None:
    # Sent on a kept connection to a hung server, then given up at the time
    # limit: the server runs it once it resumes. "Not applied" would be a lie.
    async with tier_on(server, api, "cut") as tier:
        token = await call(tier.sessions.new())
        await call(tier.carts.set(token, "hat", 1))
        with stopped(server):
            began = time.monotonic()
            with webtier.time_limit(0.5), pytest.raises(webtier.OutcomeUnknown):
                await call(tier.carts.set(token, "hat", 2))
            assert time.monotonic() - began < 0.5 * 1.5
        cart = {}
        for _ in range(50):  # the server runs what it had read once it resumes
            cart = await call(tier.carts.get(token))
            if cart == {"hat": 2}:
                break
            await asyncio.sleep(0.02)
        assert cart in ({"hat": 1}, {"hat": 2})


@pytest.mark.parametrize("fault", ["kill-9+restart", "client-kill", "sigstop"])
def test_counters_and_sessions_survive_faults_over_tls(
    fault: str, certificate: Certificate, tmp_path: Path, figures: Figures
) -> None:
    # The sync transport checks a kept TLS connection with redis-py's
    # can_read (poll cannot see what TLS buffers): reconnects after a
    # restart or a kill work, and no increment is applied twice.
    chosen = copy.copy(STANDALONE_FAULTS[fault])
    chosen.name = f"{fault} (tls)"
    with start_server(*DURABLE, tls=certificate) as server:
        assert server.url.startswith("rediss://")
        run([Counters, Sessions], chosen, Target(server.url, server), tmp_path, figures)
