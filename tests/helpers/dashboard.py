"""Live data for the dashboard's tests and screenshots, made through the
tier's own API in a thread of its own (its own event loop and client):
counters through the batched recorder, access times, sessions touched with
items, carts, pages served through the page cache's middleware on a tiny
app, scheduled rows, and a worker running every job."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import Iterator

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import webtier
from webtier.config import ACCESS_TIME, RowSettings, SessionSettings
from webtier.pagecache import CacheRoute, PageRules
from webtier.rows import FunctionSource
from webtier.web import pagecache
from webtier.workers import AsyncWorker

PAGES = ["/", "/search", "/cart", "/checkout", "/item/{id}"]
ITEMS = [f"item{i}" for i in range(1, 13)]
# A worker named as on a Kubernetes pod: the dashboard's Workers table must
# fit 1280 px with such an id.
WORKER_ID = "shop-worker-deployment-7d9f8c6b5d-x2kqz-1-a1b2c3"
INVENTORY = FunctionSource("inventory", lambda key: {"item": key, "stock": random.randint(0, 9)})


def traffic_config(prefix: str) -> webtier.Config:
    """A config whose cleaner has work: a small session cap, rows to refresh."""
    return webtier.Config(
        prefix=prefix,
        sessions=SessionSettings(limit=40, clean_interval=0.5),
        rows=RowSettings(sources=(INVENTORY,), poll=0.2),
    )


def _shop(tier: webtier.AsyncWebTier) -> object:
    async def page(request: Request) -> PlainTextResponse:
        return PlainTextResponse(f"page {request.url.path}", headers={"Cache-Control": "max-age=2"})

    app = Starlette(routes=[Route("/{path:path}", page)])
    rules = PageRules(routes=(CacheRoute("/*", ttl=2.0),))
    return pagecache.ASGIMiddleware(app, tier, rules)


async def _visit(tier: webtier.AsyncWebTier, stop: threading.Event) -> None:
    recorder = tier.counters.recorder(flush_interval=0.2)
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=_shop(tier)), base_url="http://shop"
    )
    worker = AsyncWorker(tier, heartbeat=0.5, worker_id=WORKER_ID)
    running = asyncio.ensure_future(worker.run())
    tokens: list[str] = []
    rng = random.Random(16)
    try:
        for n, item in enumerate(ITEMS):
            await tier.rows.schedule(INVENTORY, item, 1.0 + n % 3)
        while not stop.is_set():
            for _ in range(10):
                page = rng.choices(PAGES, weights=[8, 3, 2, 1, 6])[0]
                item = rng.choice(ITEMS[: rng.randint(1, len(ITEMS))])
                recorder.incr(f"views:{page}")
                seconds = rng.lognormvariate(-4.5 + PAGES.index(page) * 0.4, 0.5)
                await tier.stats.record(page, ACCESS_TIME, seconds)
                if rng.random() < 0.3 or not tokens:
                    tokens.append(await tier.sessions.new())
                    recorder.incr("signups")
                token = rng.choice(tokens[-60:])
                await tier.sessions.touch(token, item=item if page == "/item/{id}" else None)
                if page == "/cart":
                    await tier.carts.set(token, item, rng.randint(1, 3))
                await client.get(f"/item/{item}" if page == "/item/{id}" else page)
            await asyncio.sleep(0.05)
    finally:
        worker.request_stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(running, 10)
        with contextlib.suppress(Exception):
            await recorder.aclose()
        await client.aclose()


@contextlib.contextmanager
def traffic(url: str, config: webtier.Config) -> Iterator[threading.Event]:
    """Runs traffic against ``url`` until the block ends; a Redis outage
    meanwhile is ridden out (the thread retries until stopped)."""
    stop = threading.Event()

    async def main() -> None:
        while not stop.is_set():
            client = webtier.connect_async(url)
            try:
                await _visit(webtier.AsyncWebTier(client, config), stop)
            except webtier.WebtierError:
                await asyncio.sleep(0.2)
            finally:
                with contextlib.suppress(Exception):
                    await client.aclose()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(30)
