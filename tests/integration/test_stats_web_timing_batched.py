"""The timing middleware's batched recording: round trips per request, a
Redis outage during a flush, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import redis.asyncio.connection
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

import webtier
from tests.helpers.web import asgi_lifespan
from webtier._core.mux.link import Link
from webtier.config import Config, RetryPolicy
from webtier.testing import RedisServer
from webtier.web import timing

ACCESS = "AccessTime"
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("steady_hour")]


async def item(request: Request) -> Response:
    return PlainTextResponse(f"item {request.path_params.get('id', '')}")


def shop(tier: webtier.AsyncWebTier, lifespan: Any = None, **options: Any) -> Starlette:
    routes = [Route("/item/{id:int}", item), Route("/cart", item)]
    timed = Middleware(timing.ASGIMiddleware, tier=tier, **options)
    return Starlette(routes=routes, middleware=[timed], lifespan=lifespan)


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the asyncio connections' sends, redis-py's and webtier's own
    client's: one per round trip."""
    sent = [0]
    original = redis.asyncio.connection.AbstractConnection.send_packed_command
    queue = Link.send

    async def counted(self: Any, command: Any, check_health: bool = True) -> None:
        sent[0] += 1
        await original(self, command, check_health)

    def queued(self: Link, packed: bytes, count: int) -> Any:
        sent[0] += 1
        return queue(self, packed, count)

    monkeypatch.setattr(redis.asyncio.connection.AbstractConnection, "send_packed_command", counted)
    monkeypatch.setattr(Link, "send", queued)
    return sent


async def serve(app: Starlette, paths: list[str]) -> None:
    transport = httpx.ASGITransport(app=app)
    client = httpx.AsyncClient(transport=transport, base_url="http://shop.test")
    async with asgi_lifespan(app), client as http:
        for path in paths:
            assert (await http.get(path)).status_code == 200


@pytest.mark.parametrize("target", ["standalone", "cluster"], indirect=True)
async def test_requests_share_round_trips(
    async_client: Any, config: Config, sends: list[int]
) -> None:
    tier = webtier.AsyncWebTier(async_client, config)
    await tier.stats.record("/warm", ACCESS, 0.0)  # the script cache and the cluster's map
    paths = [f"/item/{i}" if i % 3 else "/cart" for i in range(300)]

    sends[0] = 0
    await serve(shop(tier, batched=False), paths)
    one_by_one = sends[0]

    sends[0] = 0
    # Every 25 ms: a few flushes, each one round trip per node for 2 routes.
    await serve(shop(tier, flush_interval=0.025), paths)
    batched = sends[0]
    found = await tier.stats.get_many(["/item/{id}", "/cart"], ACCESS)
    assert [s.count for s in found.values()] == [2 * 200, 2 * 100]
    assert one_by_one >= len(paths)
    assert batched <= one_by_one / 10, (batched, one_by_one)


async def test_shutdown_flushes_before_the_apps_own_shutdown_runs(
    async_client: Any, config: Config
) -> None:
    tier = webtier.AsyncWebTier(async_client, config)
    at_shutdown = []

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        # Where an app closes its clients: the durations are in Redis already.
        at_shutdown.append((await tier.stats.get("/cart", ACCESS)).count)

    app = shop(tier, lifespan, flush_interval=3600)  # nothing flushes but the shutdown
    await serve(app, ["/cart"] * 5)
    assert at_shutdown == [5]
    # After the shutdown (a server reusing the app): direct records.
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://s") as http:
        await http.get("/cart")
    assert (await tier.stats.get("/cart", ACCESS)).count == 6
    # Served again: batched again, flushed by this run's shutdown.
    await serve(app, ["/cart"] * 2)
    assert at_shutdown == [5, 8]


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    with RedisServer.start() as running:
        yield running


async def test_an_outage_during_flushes_fails_no_request_and_loses_no_value(
    own_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    policy = RetryPolicy(attempts=1, backoff=0.01, backoff_cap=0.01)
    client = webtier.connect_async(own_server.url, socket_timeout=0.5)
    tier = webtier.AsyncWebTier(client, Config(prefix="out", retry=policy))
    app = shop(tier, flush_interval=0.02)
    transport = httpx.ASGITransport(app=app)
    try:
        own_server.kill()  # before any connection: each flush provably fails to send
        async with (
            asgi_lifespan(app),
            httpx.AsyncClient(transport=transport, base_url="http://shop.test") as http,
        ):
            with caplog.at_level(logging.WARNING):
                for _ in range(20):
                    assert (await http.get("/cart")).status_code == 200
                    await asyncio.sleep(0.005)
                await asyncio.sleep(0.1)  # flushes fail meanwhile, and keep the values
            own_server.launch()
            for _ in range(10):
                assert (await http.get("/cart")).status_code == 200
        summary = await tier.stats.get("/cart", ACCESS)
        assert summary.count == 30  # kept through the outage, merged once back
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # nothing lost
    finally:
        await client.aclose()
