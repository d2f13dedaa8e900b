"""``access_time``: time a block and record it as its context's ``AccessTime``.

The sync timer is a context manager and a decorator; the asyncio one an async
context manager and a decorator of coroutine functions. The duration is
measured with ``time.perf_counter`` (the book's ``time.time`` jumps with the
wall clock) and recorded even when the block raises, then counted as an
error too (the book records nothing then); the block's exception always
propagates unchanged.

Timing is observability: a failure to *record* (Redis away) must not turn a
served page into an error, so it is logged (at most every 30 s, with the
count of failures) and swallowed. Use ``tier.stats.record()`` to see errors.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from webtier._keys import check_name
from webtier._ops import stats
from webtier._protocol import Op
from webtier.config import ACCESS_TIME, Config
from webtier.errors import WebtierError

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger("webtier.stats")

REPORT_EVERY = 30.0  # seconds between two log lines about failing records


class FailureLog:
    """Logs failures to record, the first at once and then at most one line
    per ``REPORT_EVERY`` seconds with how many failed meanwhile: an outage
    must not write a line per request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = -REPORT_EVERY
        self._missed = 0

    def failed(self, context: str, error: WebtierError) -> None:
        with self._lock:
            self._missed += 1
            now = time.monotonic()
            if now - self._last < REPORT_EVERY:
                return
            missed, self._missed, self._last = self._missed, 0, now
        log.warning(
            "access time not recorded (%d since the last report), e.g. %r: %s",
            missed,
            context,
            error,
        )


FAILURES = FailureLog()


def _record_op(cfg: Config, context: str, seconds: float, failed: bool) -> Op[stats.Recorded]:
    return stats.record(cfg, context, ACCESS_TIME, max(seconds, 0.0), failed=failed)


class AccessTimer:
    """Times a block (``with``) or each call of a function (decorator) and
    records it as ``context``'s ``AccessTime``. One ``with`` at a time per
    timer; decorated functions may run concurrently."""

    def __init__(self, run: Callable[[Op[Any]], Any], config: Config, context: str) -> None:
        self._run, self._config = run, config
        self.context = check_name("context", context)
        self._started: float | None = None

    def __enter__(self) -> AccessTimer:
        self._started = time.perf_counter()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        started, self._started = self._started, None
        if started is None:
            raise RuntimeError("AccessTimer exited without being entered")
        if kind is not None and not issubclass(kind, Exception):
            return  # KeyboardInterrupt, SystemExit: the process is on its way out
        seconds = time.perf_counter() - started
        try:
            self._run(_record_op(self._config, self.context, seconds, kind is not None))
        except WebtierError as failure:
            FAILURES.failed(self.context, failure)

    def __call__(self, function: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(function)
        def timed(*args: P.args, **kwargs: P.kwargs) -> T:
            with AccessTimer(self._run, self._config, self.context):
                return function(*args, **kwargs)

        return timed


class AsyncAccessTimer:
    """:class:`AccessTimer` for asyncio: ``async with``, or a decorator of
    coroutine functions. A block cancelled (``CancelledError``) is not
    recorded: the task is being torn down."""

    def __init__(
        self, run: Callable[[Op[Any]], Awaitable[Any]], config: Config, context: str
    ) -> None:
        self._run, self._config = run, config
        self.context = check_name("context", context)
        self._started: float | None = None

    async def __aenter__(self) -> AsyncAccessTimer:
        self._started = time.perf_counter()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        started, self._started = self._started, None
        if started is None:
            raise RuntimeError("AsyncAccessTimer exited without being entered")
        if kind is not None and not issubclass(kind, Exception):
            return  # cancelled or exiting: awaiting Redis now would delay it
        seconds = time.perf_counter() - started
        try:
            await self._run(_record_op(self._config, self.context, seconds, kind is not None))
        except WebtierError as failure:
            FAILURES.failed(self.context, failure)

    def __call__(
        self, function: Callable[P, Coroutine[Any, Any, T]]
    ) -> Callable[P, Coroutine[Any, Any, T]]:
        if not inspect.iscoroutinefunction(function):
            raise TypeError("the asyncio access_time decorates coroutine functions (async def)")

        @functools.wraps(function)
        async def timed(*args: P.args, **kwargs: P.kwargs) -> T:
            async with AsyncAccessTimer(self._run, self._config, self.context):
                return await function(*args, **kwargs)

        return timed
