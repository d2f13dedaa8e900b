"""Timing middleware for WSGI apps, over a sync tier (Flask:
:mod:`webtier.web.timing.flask`)::

    app = timing.WSGIMiddleware(app, tier, route=lambda environ: ...)

The context is the route's template: a framework hook sets
``environ["webtier.route"]`` to it, or ``route=``, a function of the environ
(after the app ran), returns it. The time runs to the server closing the
response, so streamed responses are timed whole. See
:mod:`webtier.web.timing`.

By default the durations are batched (``batched=True``): each request adds
its own to an in-process recorder (:class:`~webtier.stats.StatsRecorder`,
flushed by a daemon thread every ``flush_interval`` seconds with one script
call per route) instead of a round trip per request. The recorder is created
on the first request, so each process of a pre-forking server (gunicorn)
has its own; it is flushed when the interpreter exits normally (atexit), or
by :meth:`WSGIMiddleware.close` (call it from your server's worker-exit
hook: gunicorn's ``worker_exit``, uWSGI's ``atexit``). A process killed
without either loses at most ``flush_interval`` of durations.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeAlias

from webtier._core.deadline import time_limit
from webtier.stats import StatsRecorder
from webtier.sync import WebTier
from webtier.web.timing.core import FLUSH_INTERVAL, ROUTE_KEY, UNMATCHED, Timing, record

Environ: TypeAlias = dict[str, Any]
StartResponse: TypeAlias = Callable[..., Any]
WSGIApp: TypeAlias = Callable[[Environ, StartResponse], Iterable[bytes]]


def environ_route(environ: Environ) -> str | None:
    """The template a framework hook left in ``environ[ROUTE_KEY]``."""
    route = environ.get(ROUTE_KEY)
    return route if isinstance(route, str) else None


# -- the middleware ------------------------------------------------------------------------


class WSGIMiddleware(Timing[WebTier, StatsRecorder, Environ]):
    """WSGI middleware recording each request's duration as the
    ``AccessTime`` of its route's template, on a sync tier: batched in
    process by default, or one round trip per request (``batched=False``)."""

    def __init__(
        self,
        app: WSGIApp,
        tier: WebTier,
        *,
        route: Callable[[Environ], str | None] = environ_route,
        unmatched: str = UNMATCHED,
        time_limit: float | None = 1.0,
        batched: bool = True,
        flush_interval: float = FLUSH_INTERVAL,
    ) -> None:
        super().__init__(tier, route, unmatched, time_limit, batched, flush_interval)
        self.app = app
        self._pid = 0  # the process that created the recorder
        self._creating = threading.Lock()

    def close(self) -> None:
        """Flush what waits and record each later request directly (one
        round trip each). Idempotent."""
        self._closed = True
        recorder, self._recorder = self._recorder, None
        if recorder is not None and self._pid == os.getpid():
            recorder.close()

    def _current(self) -> StatsRecorder:
        recorder = self._recorder
        if recorder is not None and self._pid == os.getpid():
            return recorder
        with self._creating:
            if self._recorder is None or self._pid != os.getpid():
                if self._recorder is not None:
                    # Forked from the process that made it: its values are
                    # that process's to flush (at exit, twice otherwise), and
                    # its thread did not survive the fork.
                    atexit.unregister(self._recorder.close)
                self._recorder = self.tier.stats.recorder(flush_interval=self.flush_interval)
                self._pid = os.getpid()
            return self._recorder

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
        context = self._batched(environ, seconds, failed)
        if context is None:
            return
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
