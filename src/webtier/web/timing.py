"""Timing middleware: each request's duration as its route's ``AccessTime``.

The context is the matched route's *template* (``/item/{id}`` in Starlette,
``/item/<int:id>`` in Flask), never the raw path: one context per route, so
the number of contexts (and keys, and ranking entries) stays bounded however
many item ids, query strings or scanners' paths arrive. Requests no route
matched (404s) fold into one context, ``<unmatched>``.

A request counts as an error when the app raises or answers 5xx. The time
runs from the request's arrival to its last body chunk being handed to the
server (ASGI), or to the server closing the response (WSGI): streamed
responses are timed whole. Recording happens after the response is sent, and
a failure to record is logged, never raised into the app.

Starlette (and FastAPI) apps::

    app.add_middleware(AccessTimeMiddleware, tier=async_tier)

Flask apps::

    time_flask(app, tier)

Other WSGI apps: ``WSGIAccessTime(app, tier)``, with a framework hook that
sets ``environ["webtier.route"]`` to the template, or ``route=``, a function
of the environ (after the app ran) returning it. Other ASGI frameworks pass
``route=``, a function of the scope after the app ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeAlias

from webtier import timing
from webtier._core.deadline import check_limit, time_limit
from webtier._core.extras import extra_needed
from webtier.aio import WebTier as AsyncWebTier
from webtier.config import ACCESS_TIME
from webtier.errors import WebtierError
from webtier.sync import WebTier

with extra_needed("web", "the access time middleware"):
    from starlette.routing import BaseRoute, Host, Match, Mount
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "<unmatched>"

Environ: TypeAlias = dict[str, Any]
StartResponse: TypeAlias = Callable[..., Any]
WSGIApp: TypeAlias = Callable[[Environ, StartResponse], Iterable[bytes]]


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


# WSGI environ key where a framework hook leaves the route's template: WSGI
# middleware outside the app cannot see the app's routing otherwise.
ROUTE_KEY = "webtier.route"


def environ_route(environ: Environ) -> str | None:
    """The template a framework hook left in ``environ[ROUTE_KEY]``."""
    route = environ.get(ROUTE_KEY)
    return route if isinstance(route, str) else None


def time_flask(
    app: Any, tier: WebTier, *, unmatched: str = UNMATCHED, time_limit: float | None = 1.0
) -> None:
    """Time every request of the Flask ``app`` by its URL rule
    (``/item/<int:id>``): a teardown hook leaves the rule Flask matched where
    :class:`WSGIAccessTime`, wrapped around ``app.wsgi_app``, finds it."""
    import flask  # the app's dependency, not webtier's

    def leave_rule(error: BaseException | None) -> None:
        rule = flask.request.url_rule
        if rule is not None:
            flask.request.environ[ROUTE_KEY] = rule.rule

    app.teardown_request(leave_rule)
    app.wsgi_app = WSGIAccessTime(app.wsgi_app, tier, unmatched=unmatched, time_limit=time_limit)


# -- ASGI --------------------------------------------------------------------------------------


class AccessTimeMiddleware:
    """ASGI middleware recording each HTTP request's duration as the
    ``AccessTime`` of its route's template, on an asyncio tier."""

    def __init__(
        self,
        app: ASGIApp,
        tier: AsyncWebTier,
        *,
        route: Callable[[Scope], str | None] = starlette_route,
        unmatched: str = UNMATCHED,
        time_limit: float | None = 1.0,
    ) -> None:
        self.app, self.tier, self.route, self.unmatched = app, tier, route, unmatched
        # Seconds a record may wait for Redis: a hung server must not hold
        # the worker long after the response went out.
        self.time_limit = check_limit(time_limit, "time_limit")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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

    async def _record(self, scope: Scope, seconds: float, failed: bool) -> None:
        context = self.route(scope) or self.unmatched
        try:
            with time_limit(self.time_limit):
                await self.tier.stats.record(context, ACCESS_TIME, max(seconds, 0.0), failed=failed)
        except WebtierError as error:
            timing.FAILURES.failed(context, error)


# -- WSGI --------------------------------------------------------------------------------------


class WSGIAccessTime:
    """WSGI middleware recording each request's duration as the
    ``AccessTime`` of its route's template, on a sync tier."""

    def __init__(
        self,
        app: WSGIApp,
        tier: WebTier,
        *,
        route: Callable[[Environ], str | None] = environ_route,
        unmatched: str = UNMATCHED,
        time_limit: float | None = 1.0,
    ) -> None:
        self.app, self.tier, self.route, self.unmatched = app, tier, route, unmatched
        self.time_limit = check_limit(time_limit, "time_limit")

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        status = [500]

        def timed_start_response(line: str, headers: Any, exc_info: Any = None) -> Any:
            status[0] = int(line.split(" ", 1)[0])
            return start_response(line, headers, exc_info)

        try:
            body = self.app(environ, timed_start_response)
        except Exception:
            self.record(environ, time.perf_counter() - started, True)
            raise
        return _TimedBody(self, environ, body, started, status)

    def record(self, environ: Environ, seconds: float, failed: bool) -> None:
        context = self.route(environ) or self.unmatched
        try:
            with time_limit(self.time_limit):
                self.tier.stats.record(context, ACCESS_TIME, max(seconds, 0.0), failed=failed)
        except WebtierError as error:
            timing.FAILURES.failed(context, error)


class _TimedBody:
    """The app's response body, recorded when the server closes it (after the
    last chunk went out, as PEP 3333 has servers do)."""

    def __init__(
        self,
        timing: WSGIAccessTime,
        environ: Environ,
        body: Iterable[bytes],
        started: float,
        status: list[int],
    ) -> None:
        self._timing, self._environ, self._body = timing, environ, body
        self._started, self._status = started, status
        self._failed = False
        self._recorded = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._body
        except Exception:
            self._failed = True
            raise

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            if not self._recorded:
                self._recorded = True
                failed = self._failed or self._status[0] >= 500
                seconds = time.perf_counter() - self._started
                self._timing.record(self._environ, seconds, failed)
