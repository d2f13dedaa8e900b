"""Timing middleware for WSGI apps, over a sync tier (Flask:
:mod:`webtier.web.timing.flask`)::

    app = timing.WSGIMiddleware(app, tier, route=lambda environ: ...)

The context is the route's template: a framework hook sets
``environ["webtier.route"]`` to it, or ``route=``, a function of the environ
(after the app ran), returns it. The time runs to the server closing the
response, so streamed responses are timed whole. See
:mod:`webtier.web.timing`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeAlias

from webtier._core.deadline import check_limit, time_limit
from webtier.sync import WebTier
from webtier.web.timing.core import ROUTE_KEY, UNMATCHED, record

Environ: TypeAlias = dict[str, Any]
StartResponse: TypeAlias = Callable[..., Any]
WSGIApp: TypeAlias = Callable[[Environ, StartResponse], Iterable[bytes]]


def environ_route(environ: Environ) -> str | None:
    """The template a framework hook left in ``environ[ROUTE_KEY]``."""
    route = environ.get(ROUTE_KEY)
    return route if isinstance(route, str) else None


# -- the middleware ------------------------------------------------------------------------


class WSGIMiddleware:
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
        with time_limit(self.time_limit):
            self.tier.transport.run(record(self.tier.config, context, seconds, failed))


class _TimedBody:
    """The app's response body, recorded when the server closes it (after the
    last chunk went out, as PEP 3333 has servers do)."""

    def __init__(
        self,
        timing: WSGIMiddleware,
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
