"""A hung Redis (stopped, or every client paused) never stalls ``/metrics``
or the dashboard's API: each answers within the web budget of 1 s, with
``webtier_up 0`` and "Redis unreachable" (issue #24, item 10). Before,
a scrape waited out the client's socket timeouts and retries: 15 s, past
Prometheus's 10 s scrape timeout, so ``webtier_up 0`` never arrived.

These tests start a server of their own and stop or pause it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

import webtier
from tests.faults.servers import start_server, stopped
from webtier.testing import RedisServer
from webtier.web.dashboard import dashboard

pytestmark = [pytest.mark.faults, pytest.mark.anyio]

# The client waits 5 s for a reply and retries: an answer in less than one
# socket timeout was ended by the budget (1 s), whatever the machine's load.
SOCKET_TIMEOUT = 5.0


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with start_server() as running:
        yield running


PAUSE = 15.0  # seconds: the requests inside take about 4 (1 s each)


@contextlib.contextmanager
def paused(server: RedisServer) -> Iterator[None]:
    """``CLIENT PAUSE ALL``: every command of every client waits (an
    ``UNPAUSE`` too: the block ends when the pause does)."""
    with server.client(socket_timeout=5) as admin:
        admin.execute_command("CLIENT", "PAUSE", int(PAUSE * 1000), "ALL")
    ends = time.monotonic() + PAUSE
    yield
    time.sleep(max(0.0, ends - time.monotonic()))


@contextlib.asynccontextmanager
async def open_dashboard(server: RedisServer) -> AsyncIterator[httpx.AsyncClient]:
    client = webtier.connect_async(server.url, socket_timeout=SOCKET_TIMEOUT)
    tier = webtier.AsyncWebTier(client, webtier.Config(prefix="hung"))
    await tier.counters.record("hits")
    transport = httpx.ASGITransport(app=dashboard(tier))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    "hang",
    [stopped, pytest.param(paused, marks=pytest.mark.slow)],  # slow: the pause is waited out
    ids=["sigstop", "client-pause"],
)
async def test_a_hung_redis_is_reported_within_the_budget(
    server: RedisServer, hang: contextlib.AbstractContextManager[None]
) -> None:
    async with open_dashboard(server) as http:
        assert "webtier_up 1.0" in (await http.get("/metrics")).text
        with hang(server):  # type: ignore[operator]
            began = time.monotonic()
            scrape = await http.get("/metrics")
            assert time.monotonic() - began < SOCKET_TIMEOUT
            assert scrape.status_code == 200
            assert "webtier_up 0.0" in scrape.text
            for path in ("/api/health", "/api/counters", "/api/stats"):
                began = time.monotonic()
                answer = await http.get(path)
                assert time.monotonic() - began < SOCKET_TIMEOUT, path
                assert (answer.status_code, answer.json()) == (
                    503,
                    {"error": "Redis unreachable"},
                ), path
        # And back once it answers again.
        assert "webtier_up 1.0" in (await http.get("/metrics")).text
        assert (await http.get("/api/health")).status_code == 200
