"""One stack of the shop bench, in processes of its own: the app served by
uvicorn (one worker, as the bench runs every stack) and its background
jobs (webtier's worker, or the book's daemons) beside it.

The app process counts what the bench reports, where it happens:

* SQL statements: a SQLAlchemy ``before_cursor_execute`` event on the engine;
* Redis round trips: every ``send_packed_command`` of redis-py's sync and
  asyncio connections (one per command or pipeline sent: what a client
  waits for; ``INFO`` would count commands, several per round trip);
* its own CPU time (``time.process_time``);
* per request, in an ASGI wrapper around everything: the time a cached
  item page (``X-Cache: HIT``) spends in the app, and whether an item view
  of a visitor without a session ran any SQL.

The bench reads and zeroes these at ``/_bench/figures`` and ``/_bench/reset``.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio.connection
import redis.connection
import sqlalchemy as sa

from webtier.config import StatsSettings
from webtier.stats.histogram import Histogram, bucket_of

FIGURES, RESET = "/_bench/figures", "/_bench/reset"
TOP_ITEMS = 10_000  # "the top 10,000 items": the book's page cache admission
SESSION_COOKIES = {"webtier": "webtier_session", "book": "token", "sql": "session"}
STACK_ENVIRONMENT = "WEBTIER_BENCH_SHOP_STACK"
SUB_BUCKETS = StatsSettings(relative_error=0.01).sub_buckets


@dataclass
class _Request:
    task: asyncio.Task[Any] | None  # the request's own: what it sends is its round trips
    sql: int = 0
    round_trips: int = 0


@dataclass
class Counts:
    """What the app process did since the last reset."""

    sql: int = 0
    round_trips: int = 0
    cpu_at_reset: float = field(default_factory=time.process_time)
    hit_buckets: dict[str, int] = field(default_factory=dict)  # seconds of cached item pages
    hit_round_trips: int = 0  # the cached item pages' own (not a background flush's)
    # The same of cached item pages with a visitor's parts filled (holes).
    filled_buckets: dict[str, int] = field(default_factory=dict)
    filled_round_trips: int = 0
    top_views: int = 0  # item views of the top items by visitors without a session
    top_views_without_sql: int = 0
    item_views: int = 0  # 200 answers of item pages, every visitor
    item_views_cached: int = 0  # of those, answered from the page cache (X-Cache: HIT)
    session_item_views: int = 0  # the same, of visitors with a session
    session_item_views_cached: int = 0
    # Per kind of request ("GET /item/N, session"): [requests, round trips, SQL].
    routes: dict[str, list[int]] = field(default_factory=dict)

    def figures(self) -> dict[str, Any]:
        hits = Histogram(SUB_BUCKETS, dict(self.hit_buckets))
        filled = Histogram(SUB_BUCKETS, dict(self.filled_buckets))
        return {
            "sql": self.sql,
            "round_trips": self.round_trips,
            "cpu_seconds": time.process_time() - self.cpu_at_reset,
            "hits": hits.count,
            "hit_p99_seconds": hits.percentile(99),
            "hit_round_trips": self.hit_round_trips,
            "filled_hits": filled.count,
            "filled_hit_p99_seconds": filled.percentile(99),
            "filled_hit_round_trips": self.filled_round_trips,
            "top_views": self.top_views,
            "top_views_without_sql": self.top_views_without_sql,
            "item_views": self.item_views,
            "item_views_cached": self.item_views_cached,
            "session_item_views": self.session_item_views,
            "session_item_views_cached": self.session_item_views_cached,
            "routes": self.routes,
        }


COUNTS = Counts()
_REQUEST: contextvars.ContextVar[_Request | None] = contextvars.ContextVar("bench", default=None)


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # a worker thread's call (SQL, a sync client): no loop
        return None


def count_sql(engine: sa.Engine) -> None:
    @sa.event.listens_for(engine, "before_cursor_execute")
    def counted(*args: Any) -> None:
        COUNTS.sql += 1
        request = _REQUEST.get()  # copied into SQL threads with the context
        if request is not None:
            request.sql += 1


def count_round_trips() -> None:
    """Count each send of redis-py's connections and of webtier's own
    client (this process only)."""
    from webtier._core.mux.link import Link

    sync_send: Any = redis.connection.AbstractConnection.send_packed_command
    async_send: Any = redis.asyncio.connection.AbstractConnection.send_packed_command
    queue: Any = Link.send

    def counted() -> None:
        COUNTS.round_trips += 1
        request = _REQUEST.get()  # tasks a request starts inherit it: not theirs
        if request is not None and request.task is _current_task():
            request.round_trips += 1

    def queued(self: Any, *args: Any) -> Any:
        counted()
        return queue(self, *args)

    def sent(self: Any, *args: Any, **kwargs: Any) -> Any:
        counted()
        return sync_send(self, *args, **kwargs)

    async def sent_async(self: Any, *args: Any, **kwargs: Any) -> Any:
        counted()
        return await async_send(self, *args, **kwargs)

    redis.connection.AbstractConnection.send_packed_command = sent  # type: ignore[method-assign]
    redis.asyncio.connection.AbstractConnection.send_packed_command = sent_async  # type: ignore[method-assign]
    Link.send = queued  # type: ignore[method-assign,assignment]


def _kind(method: str, path: str, session: bool) -> str:
    """A request's kind in the per-route figures: its method, its path with
    an item's or an order's id as N, and whether it carried a session."""
    head, _, rest = path.lstrip("/").partition("/")
    shown = f"/{head}/N" if rest.isdigit() else path if len(path) <= 32 else "(other)"
    return f"{method} {shown}{', session' if session else ''}"


class Measured:
    """The stack's app, with the bench's figures answered beside it."""

    def __init__(self, app: Any, session_cookie: str, items: int) -> None:
        self.app, self.session_cookie = app, session_cookie.encode()
        self.top = min(TOP_ITEMS, items)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        global COUNTS
        path = scope.get("path", "")
        if scope["type"] == "http" and path in (FIGURES, RESET):
            if path == RESET:
                COUNTS = Counts()
            body = json.dumps(COUNTS.figures()).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = _Request(_current_task())
        token = _REQUEST.set(request)
        cache = b""
        began = time.perf_counter()

        status = 0

        async def watched(message: Any) -> None:
            nonlocal cache, status
            if message["type"] == "http.response.start":
                status = message["status"]
                cache = dict(message.get("headers", [])).get(b"x-cache", b"")
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            _REQUEST.reset(token)
        elapsed = time.perf_counter() - began
        counts = COUNTS
        session = self._has_session(scope)
        kind = _kind(scope["method"], path, session)
        tally = counts.routes.setdefault(kind, [0, 0, 0])
        tally[0] += 1
        tally[1] += request.round_trips
        tally[2] += request.sql
        if not path.startswith("/item/"):
            return
        if cache == b"HIT":
            bucket = bucket_of(elapsed, SUB_BUCKETS)
            if session:
                counts.filled_buckets[bucket] = counts.filled_buckets.get(bucket, 0) + 1
                counts.filled_round_trips += request.round_trips
            else:
                counts.hit_buckets[bucket] = counts.hit_buckets.get(bucket, 0) + 1
                counts.hit_round_trips += request.round_trips
        if status == 200:
            counts.item_views += 1
            counts.item_views_cached += cache == b"HIT"
            if session:
                counts.session_item_views += 1
                counts.session_item_views_cached += cache == b"HIT"
        item = path.removeprefix("/item/")
        if item.isdigit() and int(item) <= self.top and not session:
            counts.top_views += 1
            counts.top_views_without_sql += request.sql == 0

    def _has_session(self, scope: Any) -> bool:
        cookies = b";".join(value for name, value in scope["headers"] if name == b"cookie")
        return any(c.strip().startswith(self.session_cookie + b"=") for c in cookies.split(b";"))


def _engine(database: str) -> sa.Engine:
    return sa.create_engine(database, pool_size=20, max_overflow=0)


def own_group() -> None:
    """Make this process the leader of a process group its children join,
    so the bench pauses and resumes a stack's workers with it."""
    os.setpgid(0, 0)


def measured_app(stack: str, redis_url: str, database: str, items: int, prefix: str) -> Measured:
    """One stack's app, its SQL and round trips counted, wrapped in :class:`Measured`."""
    engine = _engine(database)
    count_sql(engine)
    count_round_trips()
    if stack == "webtier":
        from webtier.aio import WebTier as AsyncWebTier
        from webtier.config import Config
        from webtier.connect import connect_async
        from webtier.demo.shop import ShopSettings, create_app

        tier = AsyncWebTier(connect_async(redis_url), Config(prefix=prefix))
        settings = ShopSettings(items=items, run_jobs=False, secret=b"s" * 32)
        app: Any = create_app(tier, engine, settings=settings)
    else:
        from benchmarks._shop_sql import sql_app
        from benchmarks._shop_stacks import book_app

        app = book_app(redis_url, engine, items) if stack == "book" else sql_app(engine, items)
    return Measured(app, SESSION_COOKIES[stack], items)


def app_of_environment() -> Measured:
    """The app of each worker process of a stack served by several (uvicorn's
    factory: the arguments come in :data:`STACK_ENVIRONMENT`)."""
    return measured_app(**json.loads(os.environ[STACK_ENVIRONMENT]))


def serve(
    stack: str, redis_url: str, database: str, items: int, port: int, *,
    workers: int = 1, prefix: str = "shop",
) -> None:  # fmt: skip
    """Run one stack's app until killed (the target of its server process):
    uvicorn with uvloop and httptools, as the shop is deployed."""
    import uvicorn

    own_group()
    served: Any
    factory = workers > 1
    if not factory:
        served = measured_app(stack, redis_url, database, items, prefix)
    else:
        # uvicorn's workers import the app themselves: its arguments go by the environment.
        arguments = {"stack": stack, "redis_url": redis_url, "database": database,
                     "items": items, "prefix": prefix}  # fmt: skip
        os.environ[STACK_ENVIRONMENT] = json.dumps(arguments)
        served = f"{__name__}:{app_of_environment.__name__}"
    uvicorn.run(
        served,
        factory=factory,
        workers=workers,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        lifespan="on",
    )


def serve_fixed(size: int, port: int) -> None:
    """A bare Starlette app answering every ``/item/<id>`` with the same
    ``size`` bytes of HTML, under the stacks' uvicorn (the yardstick of a
    cached page: no middleware, no Redis, no template)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    body = (b"<!doctype html><p>" + b"x" * size)[:size]

    async def page(request: Request) -> Response:
        return Response(body, media_type="text/html; charset=utf-8")

    app = Starlette(routes=[Route("/item/{item_id}", page)])
    uvicorn.run(app, host="127.0.0.1", port=port, loop="uvloop", http="httptools",
                log_level="warning", access_log=False, lifespan="off")  # fmt: skip


def jobs(stack: str, redis_url: str, database: str, items: int, prefix: str = "shop") -> None:
    """Run one stack's background jobs until killed."""
    own_group()
    engine = _engine(database)
    if stack == "book":
        from benchmarks._shop_stacks import book_daemon

        book_daemon(redis_url, engine, items, threading.Event())
    elif stack == "webtier":
        asyncio.run(_webtier_jobs(redis_url, engine, items, prefix))


async def _webtier_jobs(redis_url: str, engine: sa.Engine, items: int, prefix: str) -> None:
    from webtier.aio import WebTier as AsyncWebTier
    from webtier.config import Config
    from webtier.connect import connect_async
    from webtier.demo import shopdb
    from webtier.demo.shop import ShopSettings
    from webtier.demo.shop.jobs import maintenance
    from webtier.workers.jobs import WARM_CHUNK

    tier = AsyncWebTier(connect_async(redis_url), Config(prefix=prefix))
    settings = ShopSettings(items=items, secret=b"s" * 32)
    inventory = shopdb.inventory_source(engine)
    # What the book's daemon is told at its start (book_daemon schedules the
    # rows of items 1 to 10,000, the model's most viewed), webtier's worker is
    # told too: the same rows cached before the first view. Then its
    # warm_rows job follows the ranking.
    known = range(1, min(items, TOP_ITEMS) + 1)
    for start in range(0, len(known), WARM_CHUNK):
        await tier.rows.warm(inventory, list(known[start : start + WARM_CHUNK]))
    async with maintenance(tier, inventory, settings):
        await asyncio.Event().wait()  # until the process is killed
