"""Outages end in webtier's errors, and web requests end in a 503 or an
uncached page, never an exception page or a hang: with every node of a
Cluster down, with one server down, and with a hung server (SIGSTOP).

These tests start servers of their own and kill or stop them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import flask
import httpx
import pytest
from redis.crc import key_slot
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

import webtier
from tests.faults.servers import stopped
from tests.helpers.servers import BINARIES
from tests.helpers.web import serving
from webtier import ranking
from webtier._core.keys import shard_of
from webtier.config import Config, PageCacheSettings, RetryPolicy
from webtier.pagecache import CacheRoute, PageRules
from webtier.sessions.layout import place
from webtier.testing import RedisCluster, RedisServer
from webtier.web import pagecache, sessions, timing
from webtier.web.pagecache import flask as flask_pagecache
from webtier.web.sessions import flask as flask_sessions
from webtier.web.timing import flask as flask_timing

pytestmark = pytest.mark.faults

TOKEN = "A" * 43


def config(prefix: str, **settings: Any) -> Config:
    # No page-cache counters: their recorder's thread would go on flushing to
    # servers these tests killed, long after each test.
    return Config(prefix=prefix, pagecache=PageCacheSettings(counters=False), **settings)


RETRY = RetryPolicy(attempts=2, backoff=0.01, backoff_cap=0.05)
COOKIE = "webtier_session"


# -- what a user of each API calls ----------------------------------------------------------


def operations(tier: Any) -> dict[str, Callable[[], Any]]:
    """One call of each kind on ``tier`` (sync or asyncio alike)."""
    return {
        "counters.record": lambda: tier.counters.record("hits"),
        "counters.get": lambda: tier.counters.get("hits", 60),
        "counters.get_many": lambda: tier.counters.get_many(["hits", "misses"], 60),
        "counters.names": lambda: tier.counters.names(),
        "stats.record": lambda: tier.stats.record("/", "AccessTime", 0.1),
        "stats.get": lambda: tier.stats.get("/", "AccessTime"),
        "stats.slowest": lambda: tier.stats.slowest(5),
        "sessions.new": lambda: tier.sessions.new(),
        "sessions.check": lambda: tier.sessions.check(TOKEN),
        "sessions.touch": lambda: tier.sessions.touch(TOKEN, item="42"),
        "sessions.login": lambda: tier.sessions.login(TOKEN, "ann"),
        "sessions.revoke_all": lambda: tier.sessions.revoke_all("ann"),
        "sessions.clean": lambda: tier.sessions.clean(),
        "carts.set": lambda: tier.carts.set(TOKEN, "42", 1),
        "ranking.record_view": lambda: tier.ranking.record_view("42"),
        "ranking.top": lambda: tier.ranking.top(3),
        "pagecache.invalidate_item": lambda: tier.pagecache.invalidate_item("42"),
    }


def assert_unavailable_fast(name: str, call: Callable[[], Any], within: float) -> None:
    began = time.monotonic()
    with pytest.raises(webtier.RedisUnavailable) as raised:
        call()
    # Nothing could be reached, so nothing was sent: never "maybe applied".
    assert not isinstance(raised.value, webtier.OutcomeUnknown), (name, raised.value)
    assert time.monotonic() - began < within, name


# -- a whole Cluster down -------------------------------------------------------------------


@dataclass
class DeadCluster:
    url: str
    sync_tier: webtier.WebTier


@pytest.fixture(scope="module")
def dead_cluster() -> Iterator[DeadCluster]:
    """A Cluster that served a tier (connections open, scripts loaded) and
    then lost every node."""
    with RedisCluster.start(BINARIES["standalone"], replicas=0) as cluster:
        client = webtier.connect(cluster.url, socket_timeout=0.5)
        tier = webtier.WebTier(client, config("dead", retry=RETRY))
        for call in operations(tier).values():
            with contextlib.suppress(webtier.WebtierError):
                call()
        for server in cluster.servers:
            server.kill()
        yield DeadCluster(cluster.url, tier)
        webtier.disconnect(client)


def test_every_sync_operation_raises_redis_unavailable(dead_cluster: DeadCluster) -> None:
    for name, call in operations(dead_cluster.sync_tier).items():
        assert_unavailable_fast(name, call, within=5)


def test_connecting_to_a_dead_cluster_raises_redis_unavailable(dead_cluster: DeadCluster) -> None:
    with pytest.raises(webtier.RedisUnavailable, match="cannot be reached") as raised:
        webtier.connect(dead_cluster.url)
    assert raised.value.__cause__ is not None  # redis-py's own error, kept


def test_a_server_that_is_not_a_cluster_is_a_config_error() -> None:
    refused = pytest.raises(webtier.ConfigError, match="not a Redis Cluster: use a redis:// URL")
    with RedisServer.start(BINARIES["standalone"]) as server, refused:
        webtier.connect(f"redis+cluster://127.0.0.1:{server.port}")


@pytest.mark.anyio
@pytest.mark.parametrize("fresh", [False, True], ids=["warm", "fresh"])
async def test_every_asyncio_operation_raises_redis_unavailable(
    dead_cluster: DeadCluster, fresh: bool
) -> None:
    # "fresh": a client made after the cluster died (it connects on first use).
    client = webtier.connect_async(dead_cluster.url, socket_timeout=0.5)
    tier = webtier.AsyncWebTier(client, config("dead", retry=RETRY))
    try:
        for name, call in operations(tier).items():
            began = time.monotonic()
            with pytest.raises(webtier.RedisUnavailable) as raised:
                await call()
            assert not isinstance(raised.value, webtier.OutcomeUnknown), (name, raised.value)
            assert time.monotonic() - began < 5, name
    finally:
        await client.aclose()


# -- web apps, with Redis away ----------------------------------------------------------------


async def needs_session(request: Request) -> Response:
    return PlainTextResponse(f"hello {await request.state.session.user()}")


async def views_item(request: Request) -> Response:
    await request.state.session.record_view(request.path_params["item"])
    return PlainTextResponse("viewed")


async def page(request: Request) -> Response:
    return PlainTextResponse("the home page")


def asgi_app(tier: webtier.AsyncWebTier) -> Starlette:
    """Sessions, page cache and timing around one app, as a shop stacks them."""
    rules = PageRules(routes=(CacheRoute("/"),))
    return Starlette(
        routes=[
            Route("/", page),
            Route("/me", needs_session),
            Route("/view/{item}", views_item, methods=["POST"]),
        ],
        middleware=[
            Middleware(timing.ASGIMiddleware, tier=tier),
            Middleware(pagecache.ASGIMiddleware, tier=tier, rules=rules),
            Middleware(sessions.ASGIMiddleware, tier=tier, insecure_local_http=True),
        ],
    )


def flask_app(tier: webtier.WebTier) -> flask.Flask:
    app = flask.Flask(__name__)

    @app.get("/")
    def home() -> str:
        return "the home page"

    @app.get("/me")
    def me() -> str:
        return f"hello {flask_sessions.current_session().user()}"

    flask_sessions.install(app, tier, insecure_local_http=True)
    flask_pagecache.install(app, tier, PageRules(routes=(CacheRoute("/"),)))
    flask_timing.install(app, tier)
    return app


def a_session_cookie(tier: webtier.WebTier) -> str:
    from webtier.web.sessions import SessionOptions
    from webtier.web.sessions.cookie import encode

    return f"{COOKIE}={encode(SessionOptions(), tier.sessions.new())}"


@contextlib.asynccontextmanager
async def asgi_client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        yield http


async def check_asgi_outage(url: str, cookie: str, within: float) -> None:
    client = webtier.connect_async(url, socket_timeout=0.5)
    tier = webtier.AsyncWebTier(client, config("web", retry=RETRY))
    try:
        async with asgi_client(asgi_app(tier)) as http:
            began = time.monotonic()
            home = await http.get("/")
            assert (home.status_code, home.text) == (200, "the home page")  # served uncached
            me = await http.get("/me", headers={"cookie": cookie})
            assert me.status_code == 503, me.text
            assert me.headers["retry-after"] == "5"
            assert time.monotonic() - began < within
    finally:
        await client.aclose()


def check_wsgi_outage(tier: webtier.WebTier, cookie: str, within: float) -> None:
    with serving(flask_app(tier)) as base, httpx.Client(base_url=base) as http:
        began = time.monotonic()
        home = http.get("/")
        assert (home.status_code, home.text) == (200, "the home page")
        me = http.get("/me", headers={"cookie": cookie})
        assert me.status_code == 503, me.text
        assert time.monotonic() - began < within


@pytest.mark.anyio
async def test_asgi_middleware_with_the_whole_cluster_down(dead_cluster: DeadCluster) -> None:
    await check_asgi_outage(dead_cluster.url, f"{COOKIE}={'B' * 43}", within=10)


def test_wsgi_middleware_with_the_whole_cluster_down(dead_cluster: DeadCluster) -> None:
    check_wsgi_outage(dead_cluster.sync_tier, f"{COOKIE}={'B' * 43}", within=10)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer.start(BINARIES["standalone"]) as running:
        yield running


@pytest.mark.anyio
async def test_asgi_middleware_with_its_server_down(server: RedisServer) -> None:
    tier = webtier.WebTier(webtier.connect(server.url), config("web"))
    cookie = a_session_cookie(tier)
    server.kill()
    await check_asgi_outage(server.url, cookie, within=10)


def test_wsgi_middleware_with_its_server_down(server: RedisServer) -> None:
    client = webtier.connect(server.url, socket_timeout=0.5)
    tier = webtier.WebTier(client, config("web", retry=RETRY))
    cookie = a_session_cookie(tier)
    server.kill()
    check_wsgi_outage(tier, cookie, within=10)
    webtier.disconnect(client)


# -- a hung server: the time limit ---------------------------------------------------------------


LIMIT = 0.5
# The clients below wait 5 s for a reply (then retry): a wait that ends before
# one socket timeout was ended by the limit. No bound tighter than that: on a
# loaded machine the limit's own ending can take longer than its 0.5 s.
SOCKET_TIMEOUT = 5.0


@pytest.mark.parametrize("warm", [True, False], ids=["kept-connection", "new-connection"])
def test_a_time_limit_bounds_a_sync_operation_on_a_hung_server(
    server: RedisServer, warm: bool
) -> None:
    # The client's own timeouts are long: only the limit can end the wait.
    client = webtier.connect(server.url, socket_timeout=SOCKET_TIMEOUT)
    tier = webtier.WebTier(client, config("hung"))
    if warm:
        tier.counters.record("hits")
    with stopped(server):
        for name, call, unknown in (
            # A write sent on a kept connection may have been applied; the
            # read after it needs a new connection, which never says hello.
            ("write", lambda: tier.counters.record("hits"), warm),
            ("read", lambda: tier.counters.get("hits", 60), False),
        ):
            began = time.monotonic()
            with webtier.time_limit(LIMIT), pytest.raises(webtier.RedisUnavailable) as raised:
                call()
            took = time.monotonic() - began
            assert took < SOCKET_TIMEOUT, (name, took)
            assert isinstance(raised.value, webtier.OutcomeUnknown) is unknown, name
    # Once the server runs again: the write that was maybe applied was (once);
    # one reported unavailable never was.
    assert sum(n for _, n in tier.counters.get("hits", 60)) == (2 if warm else 0)
    webtier.disconnect(client)


@pytest.mark.anyio
@pytest.mark.parametrize("warm", [True, False], ids=["kept-connection", "new-connection"])
async def test_a_time_limit_bounds_an_asyncio_operation_on_a_hung_server(
    server: RedisServer, warm: bool
) -> None:
    client = webtier.connect_async(server.url, socket_timeout=SOCKET_TIMEOUT)
    tier = webtier.AsyncWebTier(client, config("hung"))
    if warm:
        await tier.counters.record("hits")
    try:
        with stopped(server):
            began = time.monotonic()
            with webtier.time_limit(LIMIT), pytest.raises(webtier.RedisUnavailable) as raised:
                await tier.counters.record("hits")
            assert time.monotonic() - began < SOCKET_TIMEOUT
            assert isinstance(raised.value, webtier.OutcomeUnknown) is warm
            began = time.monotonic()
            with webtier.time_limit(LIMIT), pytest.raises(webtier.RedisUnavailable) as raised:
                await tier.counters.get("hits", 60)
            assert time.monotonic() - began < SOCKET_TIMEOUT
            assert not isinstance(raised.value, webtier.OutcomeUnknown)
        assert sum(n for _, n in await tier.counters.get("hits", 60)) == (2 if warm else 0)
    finally:
        await client.aclose()


def test_the_tier_default_limit_and_lifting_it(server: RedisServer) -> None:
    policy = RetryPolicy(time_limit=LIMIT)
    client = webtier.connect(server.url, socket_timeout=1.5)
    tier = webtier.WebTier(client, config("hung", retry=policy))
    tier.counters.record("hits")
    with stopped(server):
        began = time.monotonic()
        with pytest.raises(webtier.RedisUnavailable):
            tier.counters.get("hits", 60)  # the tier's own limit
        assert time.monotonic() - began < 1.5  # ended before one socket timeout
        began = time.monotonic()
        with webtier.time_limit(3), pytest.raises(webtier.RedisUnavailable):
            tier.counters.get("hits", 60)  # a longer one around the call: one try or two
        assert time.monotonic() - began > 1.4
    webtier.disconnect(client)


def test_time_limits_are_checked() -> None:
    for bad in (0, -1, float("nan"), float("inf"), True, "1", 10**6):
        with pytest.raises(webtier.ConfigError):
            RetryPolicy(time_limit=bad)  # type: ignore[arg-type]
        with pytest.raises(webtier.ConfigError), webtier.time_limit(bad):  # type: ignore[arg-type]
            pass


@pytest.mark.anyio
async def test_asgi_middleware_on_a_hung_server_answers_within_its_limit(
    server: RedisServer,
) -> None:
    sync_tier = webtier.WebTier(webtier.connect(server.url), config("web"))
    cookie = a_session_cookie(sync_tier)
    client = webtier.connect_async(server.url)  # 5 s socket timeout, 3 retries
    tier = webtier.AsyncWebTier(client, config("web"))
    try:
        async with asgi_client(asgi_app(tier)) as http:
            assert (await http.get("/me", headers={"cookie": cookie})).status_code == 200
            with stopped(server):
                # The page cache and the timing record each wait up to 1 s.
                began = time.monotonic()
                home = await http.get("/")
                assert (home.status_code, home.text) == (200, "the home page")
                assert time.monotonic() - began < SOCKET_TIMEOUT
                began = time.monotonic()
                me = await http.get("/me", headers={"cookie": cookie})
                assert me.status_code == 503
                # The session's read, then the timing record: 1 s each.
                assert time.monotonic() - began < SOCKET_TIMEOUT
    finally:
        await client.aclose()


def test_flask_on_a_hung_server_answers_within_its_limit(server: RedisServer) -> None:
    tier = webtier.WebTier(webtier.connect(server.url), config("web"))
    cookie = a_session_cookie(tier)
    with serving(flask_app(tier)) as base, httpx.Client(base_url=base, timeout=30) as http:
        assert http.get("/me", headers={"cookie": cookie}).status_code == 200
        with stopped(server):
            began = time.monotonic()
            me = http.get("/me", headers={"cookie": cookie})
            assert me.status_code == 503
            assert time.monotonic() - began < SOCKET_TIMEOUT


@pytest.mark.slow  # a Cluster of its own, nodes killed or stopped: CI only
@pytest.mark.anyio
async def test_asyncio_cluster_never_reports_an_unsent_write_as_maybe_applied() -> None:
    # Kept connections to a master that was killed and came back: the write
    # goes on a new connection, and is applied once.
    with RedisCluster.start(BINARIES["standalone"], replicas=0) as cluster:
        client = webtier.connect_async(cluster.url, socket_timeout=1)
        tier = webtier.AsyncWebTier(client, config("re", retry=RETRY))
        try:
            await tier.counters.record("hits", now=1_700_000_000)
            for node in cluster.servers:
                node.kill()
                node.launch()
            cluster.wait_healthy()
            await asyncio.sleep(0.2)  # the closed sockets' EOF reaches the loop
            await tier.counters.record("hits", now=1_700_000_000)
            assert await tier.counters.get("hits", 1) == [(1_700_000_000, 1)]
        finally:
            await client.aclose()


# -- writes that span slots, with one master down ------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[RedisCluster]:
    with RedisCluster.start(BINARIES["standalone"], replicas=0) as running:
        yield running


def master_of(cluster: RedisCluster, key: str) -> RedisServer:
    """The master serving ``key``'s slot."""
    slot = key_slot(key.encode())
    with cluster.servers[0].client() as node:
        for start, end, primary, *_ in node.execute_command("CLUSTER SLOTS"):
            if start <= slot <= end:
                return next(s for s in cluster.servers if s.port == int(primary[1]))
    raise AssertionError(f"slot {slot} is not served")


def session_away_from(tier: webtier.WebTier, cluster: RedisCluster, *down: RedisServer) -> str:
    """A new session whose shard lives on none of the ``down`` masters."""
    while True:
        token = tier.sessions.new()
        if master_of(cluster, place(tier.config, token).key) not in down:
            return token


@pytest.mark.slow  # a Cluster of its own, nodes killed or stopped: CI only
def test_a_touch_whose_view_fails_says_the_session_was_touched(cluster: RedisCluster) -> None:
    client = webtier.connect(cluster.url, socket_timeout=1)
    tier = webtier.WebTier(client, config("split", retry=RETRY))
    ranking_master = master_of(cluster, ranking.ops.shard_for(tier.config, "42").viewed)
    token = session_away_from(tier, cluster, ranking_master)
    ranking_master.kill()
    with pytest.raises(webtier.PartiallyApplied) as raised:
        tier.sessions.touch(token, item="42")
    assert (raised.value.applied, raised.value.not_applied) == (("session",), ("view",))
    assert tier.sessions.recently_viewed(token) == ["42"]  # the session part did apply
    webtier.disconnect(client)


@pytest.mark.slow  # a Cluster of its own, nodes killed or stopped: CI only
@pytest.mark.anyio
async def test_the_middleware_serves_the_page_when_only_the_view_was_lost(
    cluster: RedisCluster,
) -> None:
    sync_tier = webtier.WebTier(webtier.connect(cluster.url), config("split"))
    ranking_master = master_of(cluster, ranking.ops.shard_for(sync_tier.config, "42").viewed)
    token = session_away_from(sync_tier, cluster, ranking_master)
    ranking_master.kill()
    client = webtier.connect_async(cluster.url, socket_timeout=1)
    tier = webtier.AsyncWebTier(client, config("split", retry=RETRY))
    try:
        async with asgi_client(asgi_app(tier)) as http:
            viewed = await http.post("/view/42", headers={"cookie": f"{COOKIE}={token}"})
            assert (viewed.status_code, viewed.text) == (200, "viewed")
        assert await tier.sessions.recently_viewed(token) == ["42"]
    finally:
        await client.aclose()


def session_keys(cluster: RedisCluster, *alive: RedisServer) -> int:
    total = 0
    for server in alive:
        with server.client() as node:
            total += sum(1 for _ in node.scan_iter(match="split:{s:*}:t:*", count=1000))
    return total


@pytest.mark.slow  # a Cluster of its own, nodes killed or stopped: CI only
def test_a_user_is_listed_before_the_session_that_names_them(cluster: RedisCluster) -> None:
    client = webtier.connect(cluster.url, socket_timeout=1)
    tier = webtier.WebTier(client, config("split", retry=RETRY))
    index_master = master_of(cluster, tier.config.keys.user_sessions("ann", 64))
    alive = [s for s in cluster.servers if s is not index_master]
    token = session_away_from(tier, cluster, index_master)
    index_master.kill()
    before = session_keys(cluster, *alive)
    # With the index away, no session may name the user: revoke_all would miss it.
    for attempt in (
        lambda: tier.sessions.new(user="ann"),
        lambda: tier.sessions.login(token, "ann"),
        lambda: tier.sessions.touch(token, user="ann"),
    ):
        with pytest.raises(webtier.RedisUnavailable) as raised:
            attempt()
        assert not isinstance(raised.value, webtier.OutcomeUnknown)
    assert session_keys(cluster, *alive) == before
    assert tier.sessions.check(token) is None  # still anonymous, still live
    assert tier.sessions.info(token) is not None
    webtier.disconnect(client)


@pytest.mark.slow  # a Cluster of its own, nodes killed or stopped: CI only
def test_revoking_sessions_across_masters_says_which_ended(cluster: RedisCluster) -> None:
    client = webtier.connect(cluster.url, socket_timeout=1)
    tier = webtier.WebTier(client, config("split", retry=RETRY))
    index_master = master_of(cluster, tier.config.keys.user_sessions("bob", 64))
    tokens = [tier.sessions.new(user="bob") for _ in range(12)]
    masters = {t: master_of(cluster, place(tier.config, t).key) for t in tokens}
    victim = next(m for m in cluster.servers if m is not index_master and m in masters.values())
    victim.kill()
    with pytest.raises(webtier.PartiallyApplied) as raised:
        tier.sessions.revoke_all("bob")
    assert raised.value.applied
    assert raised.value.not_applied
    for token, master in masters.items():
        if master is not victim:
            assert tier.sessions.info(token) is None  # ended where its master answered
    webtier.disconnect(client)


@pytest.mark.slow  # a Cluster of its own, nodes killed or stopped: CI only
@pytest.mark.anyio
async def test_a_time_limit_bounds_operations_on_a_hung_cluster_master(
    cluster: RedisCluster,
) -> None:
    sync_client = webtier.connect(cluster.url, socket_timeout=SOCKET_TIMEOUT)
    async_client = webtier.connect_async(cluster.url, socket_timeout=SOCKET_TIMEOUT)
    hung_config = config("hung")
    tiers = [
        webtier.WebTier(sync_client, hung_config),
        webtier.AsyncWebTier(async_client, hung_config),
    ]
    for tier in tiers:  # connections kept to every master
        for n in range(20):
            await maybe_await(tier.counters.record(f"hits{n}"))
    hung = master_of(cluster, hung_config.keys.counter_shard(shard_of("hits0", 64))[1])
    try:
        with stopped(hung):
            for tier in tiers:
                began = time.monotonic()
                with webtier.time_limit(LIMIT), pytest.raises(webtier.RedisUnavailable):
                    await maybe_await(tier.counters.get("hits0", 60))
                assert time.monotonic() - began < SOCKET_TIMEOUT, tier
    finally:
        webtier.disconnect(sync_client)
        await async_client.aclose()


async def maybe_await(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value
