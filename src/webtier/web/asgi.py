"""webtier in one ASGI layer: sessions, the page cache, access time, hit
counters and item views, each part optional, for Starlette, FastAPI or any
ASGI app::

    from webtier.web import ASGIMiddleware

    app.add_middleware(
        ASGIMiddleware,
        tier=async_tier,
        sessions=SessionOptions(signing_keys=[key]),   # the cookie, the session, the cart
        pages=PageRules(routes=(CacheRoute("/item/*", item_pages=True, item_in_path=True),)),
        item_views=True,    # an anonymous view of an item page counts in the ranking
        timing=True,        # each request's time as its route's AccessTime
        hits="hits:",       # counters hits:<route template> and hits:all
    )

Why one layer: a stack of middlewares copies the scope and wraps ``send``
once per layer, and each layer reads the request again; here the request's
headers are read once, one ``send`` wrapper adds the session's headers,
and the page cache answers a hit (one Redis round
trip) before the session, the app or the router runs. Access time, hits and
views are counted in process and flushed in batches: a cached page costs
its one round trip and nothing more.

The order is the one the separate middlewares had when stacked, outermost
first: access time, hits and views, the session, the page
cache, the app. So the page cache stores what the app rendered, never a
session's cookie, and every response, a cached one too, goes out with the
session's headers. ``sessions.ASGIMiddleware``, ``pagecache.ASGIMiddleware``
and ``timing.ASGIMiddleware`` are this layer with one part each.

Counts kept in process are flushed when the lifespan's shutdown arrives;
an app run without a lifespan calls ``await middleware.aclose()``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from webtier._core.extras import extra_needed
from webtier.errors import RedisUnavailable, WebtierError
from webtier.pagecache.holes import ANONYMOUS
from webtier.web.timing.core import UNMATCHED, TimingOptions

with extra_needed("web", "the ASGI middleware"):
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from webtier.web.pagecache.part import PageCache
    from webtier.web.sessions.part import Sessions
    from webtier.web.timing.part import AccessTimer, starlette_route

if TYPE_CHECKING:
    from webtier.aio import WebTier as AsyncWebTier
    from webtier.counters import AsyncRecorder
    from webtier.pagecache import PageRules
    from webtier.pagecache.holes import Holes
    from webtier.web.sessions.options import SessionOptions
    from webtier.web.sessions.state import SessionState

log = logging.getLogger("webtier.web")


class ASGIMiddleware:
    """webtier's parts for an ASGI app, in one layer (see the module).

    ``sessions``: the session middleware's options (``scope_session=True``
    also fills Starlette's ``request.session``); ``pages``: the page cache's
    rules; ``holes``: the holes of the pages of routes with ``holes=True``
    and their fills (:mod:`webtier.pagecache.holes`): those pages are
    answered from the cache to visitors with a session too, their holes
    filled from the session read in the page's round trip;
    ``item_views``: a 200 or 304 answer to an item page the page cache
    planned counts one view of its item in the ranking (a visitor with a
    session on a route with holes: in their session's recently viewed
    too, in the page's round trip; on other routes their session's touch
    counts it);
    ``timing``: access time (True, or :class:`TimingOptions`); ``hits``: a
    counter name prefix, each response counting one in ``<hits><route
    template>`` and ``<hits>all``. ``route``: the template of
    a request's route, for timing and hits (default: Starlette's, matched
    again when the page cache answered and the router never ran)."""

    def __init__(
        self,
        app: ASGIApp,
        tier: AsyncWebTier,
        *,
        sessions: SessionOptions | None = None,
        scope_session: bool = False,
        pages: PageRules | None = None,
        holes: Holes | None = None,
        item_views: bool = False,
        timing: TimingOptions | bool = False,
        hits: str | None = None,
        route: Callable[[Scope], str | None] | None = None,
    ) -> None:
        self.app, self.tier = app, tier
        self.route = partial(starlette_route, app=app) if route is None else route
        self.sessions: Sessions | None = None
        if sessions is not None:
            self.sessions = Sessions(tier, sessions, scope_session)
        if holes is not None and (pages is None or self.sessions is None):
            raise ValueError("holes need pages (the routes with holes) and sessions (their fills)")
        self.pages: PageCache | None = None if pages is None else PageCache(tier, pages, holes)
        self.holes = holes
        if item_views and self.pages is None:
            raise ValueError("item_views needs pages: the page cache's rules name item pages")
        self.item_views = item_views
        options = TimingOptions() if timing is True else timing or None
        self.timer: AccessTimer | None = None
        if options is not None:
            self.timer = AccessTimer(tier, self.route, options)
        self.hits = hits
        self.unmatched = options.unmatched if options is not None else UNMATCHED
        self._counts: AsyncRecorder | None = None  # hits, and the page cache's outcomes
        self._counts_loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                receive = self._flushing_on_shutdown(receive)
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        exchange = Exchange(self.sessions, scope, send)
        try:
            if self.pages is None:
                await self.render(scope, receive, exchange.send, exchange)
            else:
                await self.pages.serve(self, scope, receive, exchange)
        except RedisUnavailable as error:
            if self.sessions is None or exchange.started:
                await self._observe(scope, exchange, started, failed=True)
                raise  # too late for a 503: the server closes the connection
            # The handler needed the session and Redis is away: a 503,
            # without the session's headers.
            exchange.session = None
            await self.sessions.answer_unavailable(error, exchange.send)
        except Exception:  # not on cancellation: the task is being torn down
            await self._observe(scope, exchange, started, failed=True)
            raise
        await self._observe(scope, exchange, started, failed=False)

    async def render(self, scope: Scope, receive: Receive, send: Send, exchange: Exchange) -> None:
        """The app's answer, the session loaded around it when the app
        reads it as ``scope["session"]`` (the page cache calls this on a
        miss, with a ``send`` of its own)."""
        if exchange.session is None:
            await self.app(scope, receive, send)
        else:
            await exchange.session.run(self.app, scope, receive, send)

    async def _observe(
        self, scope: Scope, exchange: Exchange, started: float, failed: bool
    ) -> None:
        """What is counted of every response, after it went out."""
        if self.timer is None and self.hits is None and not self.item_views:
            return
        status = exchange.status
        failed = failed or status >= 500
        template = self.route(scope) or self.unmatched
        if self.timer is not None:
            ended = exchange.ended if exchange.ended is not None else time.perf_counter()
            await self.timer.record(template, ended - started, failed)
        if self.hits is not None:
            counts = self.counts()
            counts.incr(self.hits + template)
            counts.incr(self.hits + "all")
        item = exchange.item
        if item is not None and status in (200, 304):  # a revalidated page was viewed too
            try:
                await self.tier.ranking.record_view(item)
            except WebtierError as error:  # a lost view must not fail a served page
                log.warning("a view was not counted: %s", error)

    def counts(self) -> AsyncRecorder:
        """The in-process counter recorder of the running loop, made on
        first use (test clients run one loop per run: each gets its own)."""
        loop = asyncio.get_running_loop()
        if self._counts is None or self._counts_loop is not loop:
            self._counts, self._counts_loop = self.tier.counters.recorder(), loop
        return self._counts

    async def aclose(self) -> None:
        """Flush what is counted in process (call at shutdown; the
        lifespan's shutdown does). Idempotent."""
        if self.timer is not None:
            await self.timer.aclose()
        counts, self._counts = self._counts, None
        if counts is not None:
            await counts.aclose()

    def _flushing_on_shutdown(self, receive: Receive) -> Receive:
        async def flushing_receive() -> Message:
            message = await receive()
            # Flushed before the app hears of the shutdown: its own shutdown
            # may close the tier's client, and once it answers, the server
            # may end the loop the recorders' tasks run in. The server has
            # stopped taking requests by then.
            if message["type"] == "lifespan.shutdown":
                await self.aclose()
            elif message["type"] == "lifespan.startup" and self.timer is not None:
                self.timer.reopen()  # served again (a test client's next run)
            return message

        return flushing_receive


class Exchange:
    """One request's response as it goes out: the single ``send`` wrapper
    of the layer, and what is counted of it afterwards."""

    __slots__ = ("ended", "item", "raw_send", "session", "started", "status", "visit")

    def __init__(self, sessions: Sessions | None, scope: Scope, send: Send) -> None:
        self.raw_send = send
        self.status = 500  # if the app raises before answering
        self.ended: float | None = None
        self.started = False
        self.item: str | None = None  # an item page's item, when its view counts
        self.visit = ANONYMOUS  # what its page's holes are filled with
        self.session = None if sessions is None else sessions.begin(scope)

    @property
    def visitor(self) -> SessionState | None:
        """The request's session as the page cache reads it."""
        return None if self.session is None else self.session.state

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = message["status"]
            if self.session is not None:
                headers = list(message.get("headers", ()))
                await self.session.finish(headers)
                message = {**message, "headers": headers}
            self.started = True
        await self.raw_send(message)
        if kind == "http.response.body" and not message.get("more_body", False):
            self.ended = time.perf_counter()  # background tasks run after: not counted
