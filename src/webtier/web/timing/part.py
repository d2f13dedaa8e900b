"""The access-time part of webtier's ASGI layer (:mod:`webtier.web.asgi`):
the template of a request's Starlette route, and its duration recorded
under it, batched in process or one round trip each."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from webtier._core.deadline import time_limit
from webtier._core.extras import extra_needed
from webtier.web.timing.core import Timing, TimingOptions, record

with extra_needed("web", "the access time middleware"):
    from starlette.routing import BaseRoute, Host, Match, Mount
    from starlette.types import Scope


if TYPE_CHECKING:
    from webtier.aio import WebTier as AsyncWebTier
    from webtier.stats import AsyncStatsRecorder


# -- route templates -----------------------------------------------------------------------


def starlette_route(scope: Scope, app: object = None) -> str | None:
    """The template of the Starlette route that served ``scope`` (read after
    the app ran), with mount prefixes: ``/api/users/{uid}``; matched here
    when the app never ran (the page cache answered). ``app``: the
    Starlette app a middleware wraps, for requests it answered before
    Starlette ran at all (the middleware is outside it, in front)."""
    router = scope.get("router")  # the app's outermost router; it sets it
    if router is None:
        # Starlette sets the app before its middleware run; its router
        # never saw a request answered from the cache.
        router = getattr(scope.get("app", app), "router", None)
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
    return _MATCHED.template(router, arrived)


class _Matched:
    """Templates matched again from the top, by what a match reads: the
    router (and its number of routes), the path, root path, method and
    ``Host``. Pages answered from the page cache come again and again, and
    matching walks every route of every mount. At most ``entries``; the
    oldest goes first. Each entry holds its router, so no other router can
    take its ``id`` while the entry lives. A request whose path, host and
    method are longer than ``longest`` is matched every time: no request
    makes the table large."""

    def __init__(self, entries: int = 4096, longest: int = 512) -> None:
        self.entries, self.longest = entries, longest
        self._known: dict[tuple[object, ...], tuple[object, str | None]] = {}

    def template(self, router: Any, arrived: Scope) -> str | None:
        host = next((v for k, v in arrived["headers"] if k == b"host"), b"")
        path, root_path, method = arrived["path"], arrived["root_path"], arrived["method"]
        if len(path) + len(root_path) + len(host) + len(method) > self.longest:
            return _template(router.routes, arrived, "")
        key = (id(router), len(router.routes), arrived["type"], path, root_path, method, host)
        known = self._known.get(key)
        if known is not None and known[0] is router:
            return known[1]
        template = _template(router.routes, arrived, "")
        if len(self._known) >= self.entries:
            self._known.pop(next(iter(self._known)), None)
        self._known[key] = (router, template)
        return template


_MATCHED = _Matched()


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


class AccessTimer(Timing["AsyncWebTier", "AsyncStatsRecorder", Scope]):
    """The access-time part of webtier's ASGI layer (:mod:`webtier.web.asgi`):
    records a request's duration under its route's template, batched in
    process or one round trip each."""

    def __init__(
        self, tier: AsyncWebTier, route: Callable[[Scope], str | None], options: TimingOptions
    ) -> None:
        super().__init__(
            tier,
            route,
            options.unmatched,
            options.time_limit,
            options.batched,
            options.flush_interval,
        )
        self._loop: asyncio.AbstractEventLoop | None = None

    async def record(self, context: str, seconds: float, failed: bool) -> None:
        if self._added(context, seconds, failed):
            return
        with time_limit(self.time_limit):
            await self.tier.transport.run(record(self.tier.config, context, seconds, failed))

    async def aclose(self) -> None:
        """Flush what waits and record each later request directly (one
        round trip each). Idempotent; called on the lifespan's shutdown."""
        self._closed = True
        recorder, self._recorder = self._recorder, None
        if recorder is not None:
            await recorder.aclose()

    def reopen(self) -> None:
        """Batched again: the app is served again (a test client's next run)."""
        self._closed = False

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
