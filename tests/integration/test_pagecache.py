"""The page cache's serve operation on every target and both APIs, plus the
concurrency and fault cases: a stampede across processes renders once, a
render holder killed mid-render wedges nothing, and a site whose Redis is
stopped keeps serving."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

import webtier
from tests.helpers.servers import all_keys
from webtier._core.protocol import Call
from webtier.config import Config, PageCacheSettings, RetryPolicy
from webtier.pagecache import CacheRoute, PageRequest, PageRules
from webtier.testing import RedisServer
from webtier.types import Rendered, Served
from webtier.web import pagecache

pytestmark = pytest.mark.anyio

HOT = PageRules(routes=(CacheRoute("/hot"),))
PAGE = Rendered(200, (("content-type", "text/plain"), ("content-length", "4")), b"page", 300.0)


def _plan(config: Config, url: str = "http://shop.test/hot", rules: PageRules = HOT) -> Any:
    plan = rules.plan(config, PageRequest.from_url(url))
    assert plan is not None
    return plan


class Renders:
    """A render that logs each call to a file (so processes can share it)."""

    def __init__(self, log: Path, pause: float = 0.0, hang: bool = False) -> None:
        self.log, self.pause, self.hang = log, pause, hang

    def __call__(self) -> Rendered:
        with open(self.log, "a") as out:
            out.write(f"{os.getpid()}\n")
        if self.hang:
            threading.Event().wait()
        time.sleep(self.pause)
        return PAGE

    def count(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0


@pytest.mark.matrix
async def test_serve_renders_once_then_hits(tier: Any, tmp_path: Path) -> None:
    renders = Renders(tmp_path / "renders")
    plan = _plan(tier.config)
    first: Served = await tier.pagecache.serve(plan, Call(renders))
    second: Served = await tier.pagecache.serve(plan, Call(renders))
    assert first.outcome == "MISS"
    assert second.outcome == "HIT"
    assert second.page is not None
    assert second.page.plain_body() == b"page"
    assert renders.count() == 1


async def test_item_pages_are_admitted_by_rank(
    tier_factory: Any, prefix: str, tmp_path: Path
) -> None:
    config = Config(prefix=prefix, pagecache=PageCacheSettings(top=1))
    tier = tier_factory(config)
    renders = Renders(tmp_path / "renders")
    for item in ("a", "a", "b"):
        await tier.ranking.record_view(item)
    items = PageRules(routes=(CacheRoute("/item", item_pages=True),))
    popular = _plan(config, "/item?item=a", items)
    unpopular = _plan(config, "/item?item=b", items)
    never_viewed = _plan(config, "/item?item=c", items)
    outcomes = [(await tier.pagecache.serve(p, Call(renders))).outcome for p in [popular] * 2]
    assert outcomes == ["MISS", "HIT"]
    for plan in (unpopular, unpopular, never_viewed):
        assert (await tier.pagecache.serve(plan, Call(renders))).outcome == "MISS"
    assert renders.count() == 4


@pytest.mark.matrix
async def test_invalidation_fences_a_render_in_flight(tier: Any, tmp_path: Path) -> None:
    """A render that began before an invalidation does not store its page."""
    plan = _plan(tier.config, "/item?item=x", PageRules(routes=(CacheRoute("/item"),)))
    started, go_on = threading.Event(), threading.Event()

    def render() -> Rendered:
        started.set()
        assert go_on.wait(30)
        return PAGE

    import anyio

    async with anyio.create_task_group() as group:
        results: list[Served] = []

        async def serve() -> None:
            results.append(await tier.pagecache.serve(plan, Call(render)))

        group.start_soon(serve)
        await anyio.to_thread.run_sync(started.wait, 30)
        assert await tier.pagecache.invalidate_item("x") == 0
        go_on.set()
    assert results[0].outcome == "MISS"
    again = await tier.pagecache.serve(plan, Call(Renders(tmp_path / "r")))
    assert again.outcome == "MISS"  # the fenced render was not stored


@pytest.mark.matrix
async def test_keys_stay_under_their_tags(tier: Any, redis_url: str, tmp_path: Path) -> None:
    rules = PageRules(routes=(CacheRoute("/*"),))
    evil = "/}{x}:page:" + "\u00e9" * 10
    plan = _plan(tier.config, f"http://shop.test{evil}?item=%7Bevil%7D", rules)
    await tier.pagecache.serve(plan, Call(Renders(tmp_path / "r")))
    keys = [k.decode() for k in all_keys(redis_url, f"{tier.config.prefix}:*")]
    assert keys, "nothing stored"
    for key in keys:
        assert key.startswith(f"{tier.config.prefix}:{{pc:") or key.startswith(
            f"{tier.config.prefix}:{{v"
        )
    assert not any("page:\u00e9" in k or "evil}" in k.split("}", 1)[0] for k in keys)


# -- across processes -----------------------------------------------------------------------


def _stampede(url: str, prefix: str, log: str, barrier: Any, threads: int) -> None:
    client = webtier.connect(url)
    tier = webtier.WebTier(client, Config(prefix=prefix))
    plan = _plan(tier.config)
    renders = Renders(Path(log), pause=0.5)
    outcomes: list[str] = []

    def one() -> None:
        barrier.wait(60)
        outcomes.append(tier.pagecache.serve(plan, Call(renders)).outcome)

    workers = [threading.Thread(target=one) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(outcomes) == threads
    webtier.disconnect(client)


@pytest.mark.slow
def test_a_stampede_across_processes_renders_once(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    context = multiprocessing.get_context("spawn")
    processes, threads = 4, 50
    barrier = context.Barrier(processes * threads)
    log = tmp_path / "renders"
    workers = [
        context.Process(target=_stampede, args=(redis_url, prefix, str(log), barrier, threads))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    assert Renders(log).count() == 1


def _hold(url: str, prefix: str, log: str) -> None:
    client = webtier.connect(url)
    config = Config(prefix=prefix, pagecache=PageCacheSettings(lock_lease=1.0))
    tier = webtier.WebTier(client, config)
    tier.pagecache.serve(_plan(config), Call(Renders(Path(log), hang=True)))


@pytest.mark.slow
def test_a_render_holder_killed_wedges_nothing(redis_url: str, prefix: str, tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    log = tmp_path / "victim"
    victim = context.Process(target=_hold, args=(redis_url, prefix, str(log)))
    victim.start()
    try:
        deadline = time.time() + 60
        while Renders(log).count() == 0:
            assert time.time() < deadline, "the victim never began to render"
            time.sleep(0.01)
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.join()
    finally:
        if victim.is_alive():
            victim.kill()
    client = webtier.connect(redis_url)
    config = Config(prefix=prefix, pagecache=PageCacheSettings(lock_lease=1.0, lock_wait=60))
    tier = webtier.WebTier(client, config)
    try:
        renders = Renders(tmp_path / "after")
        served = tier.pagecache.serve(_plan(config), Call(renders))
        # It waited for the dead holder's lease, then rendered and stored:
        # only a lock holder stores (a waiter giving up renders uncached).
        assert served.outcome == "MISS"
        assert served.page is not None
        assert tier.pagecache.serve(_plan(config), Call(renders)).outcome == "HIT"
        assert renders.count() == 1
    finally:
        webtier.disconnect(client)


# -- Redis stopped --------------------------------------------------------------------------


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    with RedisServer.start() as running:
        yield running


async def hello(request: Request) -> Response:
    return PlainTextResponse("hello")


async def test_a_site_whose_redis_is_stopped_serves_uncached(
    own_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    client = webtier.connect_async(own_server.url)
    config = Config(
        prefix="outage",
        retry=RetryPolicy(attempts=0),
        pagecache=PageCacheSettings(counters=False),
    )
    tier = webtier.AsyncWebTier(client, config)
    app = Starlette(routes=[Route("/hot", hello)])
    app.add_middleware(pagecache.ASGIMiddleware, tier=tier, rules=HOT)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://shop.test") as http:
        assert (await http.get("/hot")).headers["x-cache"] == "MISS"
        assert (await http.get("/hot")).headers["x-cache"] == "HIT"
        own_server.stop()
        with caplog.at_level(logging.WARNING, logger="webtier.pagecache"):
            for _ in range(5):
                response = await http.get("/hot")
                assert response.status_code == 200
                assert response.text == "hello"
                assert response.headers["x-cache"] == "MISS"
        assert len([r for r in caplog.records if r.name == "webtier.pagecache"]) == 1
    await client.aclose()


def test_a_flask_site_whose_redis_is_stopped_serves_uncached(
    own_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    import flask
    from werkzeug.serving import make_server

    client = webtier.connect(own_server.url)
    config = Config(prefix="outage", retry=RetryPolicy(attempts=0))
    app = flask.Flask("outage")
    app.get("/hot")(lambda: "hello")
    cached = pagecache.WSGIMiddleware(app.wsgi_app, webtier.WebTier(client, config), HOT)
    app.wsgi_app = cached  # type: ignore[method-assign]
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_port}") as http:
            assert http.get("/hot").headers["x-cache"] == "MISS"
            assert http.get("/hot").headers["x-cache"] == "HIT"
            own_server.stop()
            with caplog.at_level(logging.WARNING, logger="webtier.pagecache"):
                for _ in range(5):
                    response = http.get("/hot")
                    assert response.status_code == 200
                    assert response.text == "hello"
                    assert response.headers["x-cache"] == "MISS"
        assert len([r for r in caplog.records if r.name == "webtier.pagecache"]) == 1
    finally:
        server.shutdown()
        cached.close()
        webtier.disconnect(client)


# -- memory bounded with no worker running ----------------------------------------------------


@pytest.mark.matrix
async def test_every_page_cache_key_expires_by_itself(
    tier: Any, redis_url: str, tmp_path: Path
) -> None:
    """After every kind of write, with no worker running, each page-cache key has a TTL."""
    rules = PageRules(routes=(CacheRoute("/item", item_pages=True), CacheRoute("/hot")))
    await tier.ranking.record_view("x")
    item_page = _plan(tier.config, "/item?item=x", rules)
    hot = _plan(tier.config, "http://shop.test/hot", rules)
    not_storable = _plan(tier.config, "/item?item=x&page=2", rules)
    renders = Renders(tmp_path / "renders")
    for plan in (item_page, hot):
        await tier.pagecache.serve(plan, Call(renders))  # page, index, item set, gen read
    private = Rendered(200, PAGE.headers, b"mine", None)
    await tier.pagecache.serve(not_storable, Call(lambda: private))  # a pass note
    await tier.pagecache.invalidate("http://shop.test/hot", rules=rules)  # a generation
    await tier.pagecache.serve(hot, Call(renders))
    await tier.pagecache.invalidate_item("x")
    await tier.pagecache.serve(item_page, Call(renders))
    await tier.pagecache.invalidate_all()  # every shard's generation
    await tier.pagecache.serve(hot, Call(renders))
    keys = [k.decode() for k in all_keys(redis_url, f"{tier.config.prefix}:{{pc:*")]
    kinds = {key.split("}:")[1].split(":")[0] for key in keys}
    assert {"gen", "pages", "page", "item"} <= kinds, kinds
    client = webtier.connect(redis_url)
    try:
        lives = {key: client.pttl(key) for key in keys}
    finally:
        webtier.disconnect(client)
    assert not [key for key, life in lives.items() if life < 0], "keys without a TTL"
    settings = tier.config.pagecache
    longest = (settings.lock_lease + max(settings.ttl + settings.grace, settings.pass_ttl)) * 1000
    assert max(lives.values()) <= longest


async def test_a_generation_that_expired_still_fences_a_render_in_flight(
    tier_factory: Any, prefix: str, redis_url: str
) -> None:
    """The render claims with a generation about to expire; it expires; an
    invalidation comes; the render must not store. (A counter restarted at
    its old value by the invalidation would let it.)"""
    settings = PageCacheSettings(lock_lease=2.0, ttl=0.05, grace=0, pass_ttl=0.05, jitter=0)
    tier = tier_factory(Config(prefix=prefix, pagecache=settings))
    plan = _plan(tier.config, "/item?item=x", PageRules(routes=(CacheRoute("/item"),)))
    client = webtier.connect(redis_url)
    started, go_on = threading.Event(), threading.Event()

    def render() -> Rendered:
        started.set()
        assert go_on.wait(30)
        return PAGE

    async def until(ready: Any) -> None:
        deadline = time.monotonic() + 10
        while not ready():
            assert time.monotonic() < deadline, "timed out"
            await anyio.sleep(0.005)

    try:
        await tier.pagecache.invalidate_item("x")
        await until(lambda: 0 <= client.pttl(plan.shard.gen) < 300)
        async with anyio.create_task_group() as group:
            results: list[Served] = []

            async def serve() -> None:
                results.append(await tier.pagecache.serve(plan, Call(render)))

            group.start_soon(serve)
            await anyio.to_thread.run_sync(started.wait, 30)
            await until(lambda: not client.exists(plan.shard.gen))
            await tier.pagecache.invalidate_item("x")
            go_on.set()
        assert results[0].outcome == "MISS"
        again = await tier.pagecache.serve(plan, Call(lambda: PAGE))
        assert again.outcome == "MISS", "the render from before the invalidation was stored"
    finally:
        go_on.set()
        webtier.disconnect(client)
