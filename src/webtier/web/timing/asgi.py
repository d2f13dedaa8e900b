"""Timing middleware for ASGI apps (Starlette, FastAPI), over an asyncio tier::

    from webtier.web import timing

    app.add_middleware(timing.ASGIMiddleware, tier=async_tier)

The context is the matched Starlette route's *template* (``/item/{id}``),
with mount prefixes; other ASGI frameworks pass ``route=``, a function of
the scope after the app ran. The time runs from the request's arrival to its
last body chunk being handed to the server: streamed responses are timed
whole. See :mod:`webtier.web.timing`.

By default the durations are batched (``batched=True``): each request adds
its own to an in-process recorder, flushed every ``flush_interval`` seconds
with one script call per route, instead of a round trip per request. The
recorder is created on the first request, in the server's event loop, and
flushed when the lifespan's shutdown arrives, before the app's own shutdown
runs; an app run without a lifespan calls
``await middleware.aclose()`` before its loop ends (what is not flushed by
then is lost, as with a crash).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from webtier._core.deadline import time_limit
from webtier._core.extras import extra_needed
from webtier.web.timing.core import FLUSH_INTERVAL, UNMATCHED, Timing, record

with extra_needed("web", "the access time middleware"):
    from starlette.routing import BaseRoute, Host, Match, Mount
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from webtier.aio import WebTier as AsyncWebTier
    from webtier.stats import AsyncStatsRecorder


# -- route templates -----------------------------------------------------------------------


def starlette_route(scope: Scope) -> str | None:
    """The template of the Starlette route that served ``scope`` (read after
    the app ran), with mount prefixes: ``/api/users/{uid}``."""
    router = scope.get("router")  # the app's outermost router; it sets it
    if router is None:
        return None
    route = scope.get("route")  # the innermost route, set by recent Starlette
    if route is not None and not isinstance(route, Mount | Host):
        # The common case, a route of the app's own router: no matching again.
        for candidate in router.routes:
            if candidate is route:
                return str(route.path_format)
    # Mounted routes, 405s and 404s: match again from the top, as the router
    # did, on the path and root path the request arrived with.
    arrived = {
        "type": scope["type"],
        "path": scope["path"],
        "root_path": scope.get("app_root_path", scope.get("root_path", "")),
        "method": scope.get("method", "GET"),
        "headers": scope.get("headers", []),
        "path_params": {},
    }
    return _template(router.routes, arrived, "")


def _template(routes: Sequence[BaseRoute], scope: Scope, prefix: str) -> str | None:
    partial = None
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return _leaf(route, {**scope, **child}, prefix)
        if match is Match.PARTIAL and partial is None:
            partial = (route, child)  # the right path, another method: a 405
    if partial is not None:
        route, child = partial
        return _leaf(route, {**scope, **child}, prefix)
    return None


def _leaf(route: BaseRoute, scope: Scope, prefix: str) -> str | None:
    if isinstance(route, Host):
        return _template(route.routes, scope, prefix)
    if isinstance(route, Mount):
        mounted = prefix + route.path_format.removesuffix("/{path}")
        if route.routes:
            return _template(route.routes, scope, mounted)
        return mounted + "/{path}"  # an app without routes (static files...)
    path_format: str | None = getattr(route, "path_format", None)
    return None if path_format is None else prefix + path_format


# -- the middleware ------------------------------------------------------------------------


class ASGIMiddleware(Timing["AsyncWebTier", "AsyncStatsRecorder", Scope]):
    """ASGI middleware recording each HTTP request's duration as the
    ``AccessTime`` of its route's template, on an asyncio tier: batched in
    process by default, or one round trip per request (``batched=False``)."""

    def __init__(
        self,
        app: ASGIApp,
        tier: AsyncWebTier,
        *,
        route: Callable[[Scope], str | None] = starlette_route,
        unmatched: str = UNMATCHED,
        time_limit: float | None = 1.0,
        batched: bool = True,
        flush_interval: float = FLUSH_INTERVAL,
    ) -> None:
        super().__init__(tier, route, unmatched, time_limit, batched, flush_interval)
        self.app = app
        self._loop: asyncio.AbstractEventLoop | None = None

    async def aclose(self) -> None:
        """Flush what waits and record each later request directly (one
        round trip each). Idempotent; called on the lifespan's shutdown."""
        self._closed = True
        recorder, self._recorder = self._recorder, None
        if recorder is not None:
            await recorder.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self.batched:
            await self.app(scope, self._flushing_on_shutdown(receive), send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        ended: float | None = None
        status = 500  # if the app raises before answering

        async def timed_send(message: Message) -> None:
            nonlocal ended, status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                ended = time.perf_counter()  # background tasks run after: not counted

        def elapsed() -> float:
            return (time.perf_counter() if ended is None else ended) - started

        try:
            await self.app(scope, receive, timed_send)
        except Exception:  # not on cancellation: the task is being torn down
            await self._record(scope, elapsed(), True)
            raise
        await self._record(scope, elapsed(), status >= 500)

    def _flushing_on_shutdown(self, receive: Receive) -> Receive:
        async def flushing_receive() -> Message:
            message = await receive()
            # Flushed before the app hears of the shutdown: its own shutdown
            # may close the tier's client, and once it answers, the server
            # may end the loop the recorder's task runs in. The server has
            # stopped taking requests by then; any later one is recorded
            # directly.
            if message["type"] == "lifespan.shutdown":
                await self.aclose()
            elif message["type"] == "lifespan.startup":
                self._closed = False  # served again (a test client's next run): batched again
            return message

        return flushing_receive

    def _current(self) -> AsyncStatsRecorder:
        loop = asyncio.get_running_loop()
        recorder = self._recorder
        if recorder is None or self._loop is not loop:
            # Created in the loop that serves the requests (the constructor
            # runs outside any). A new loop (test clients start one per
            # run) gets a recorder of its own: the last one's task ended
            # with its loop.
            recorder = self.tier.stats.recorder(flush_interval=self.flush_interval)
            self._recorder, self._loop = recorder, loop
        return recorder

    async def _record(self, scope: Scope, seconds: float, failed: bool) -> None:
        context = self._batched(scope, seconds, failed)
        if context is None:
            return
        with time_limit(self.time_limit):
            await self.tier.transport.run(record(self.tier.config, context, seconds, failed))
