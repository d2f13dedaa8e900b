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
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from webtier._core.keys import check_name
from webtier._core.protocol import Op
from webtier._core.throttle import OutageLog
from webtier._ops import stats
from webtier.config import ACCESS_TIME, Config
from webtier.errors import WebtierError
from webtier.types import Recorded

P = ParamSpec("P")
T = TypeVar("T")

REPORT_EVERY = 30.0  # seconds between two log lines about failing records


def failure_log() -> OutageLog:
    """The log of failures to record an access time (one per process)."""
    return OutageLog("webtier.stats", REPORT_EVERY, "access time not recorded")


FAILURES = failure_log()


class _Stopwatch:
    """What both timers share: the context, checked up front, and the start."""

    def __init__(self, config: Config, context: str) -> None:
        self._config = config
        self.context = check_name("context", context)
        self._started: float | None = None

    def _start(self) -> None:
        self._started = time.perf_counter()

    def _stop(self, kind: type[BaseException] | None) -> Op[Recorded] | None:
        """The operation recording the block that just ended, or None when a
        KeyboardInterrupt, SystemExit or cancellation ends it: the process or
        task is on its way out, and waiting on Redis would only delay it."""
        started, self._started = self._started, None
        if started is None:
            raise RuntimeError(f"{type(self).__name__} exited without being entered")
        if kind is not None and not issubclass(kind, Exception):
            return None
        seconds = max(time.perf_counter() - started, 0.0)
        failed = kind is not None
        return stats.record(self._config, self.context, ACCESS_TIME, seconds, failed=failed)


class AccessTimer(_Stopwatch):
    """Times a block (``with``) or each call of a function (decorator) and
    records it as ``context``'s ``AccessTime``. One ``with`` at a time per
    timer; decorated functions may run concurrently."""

    def __init__(self, run: Callable[[Op[Any]], Any], config: Config, context: str) -> None:
        super().__init__(config, context)
        self._run = run

    def __enter__(self) -> AccessTimer:
        self._start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        record = self._stop(kind)
        if record is not None:
            try:
                self._run(record)
            except WebtierError as failure:
                FAILURES.failed(failure, f"e.g. {self.context!r}")

    def __call__(self, function: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(function)
        def timed(*args: P.args, **kwargs: P.kwargs) -> T:
            with AccessTimer(self._run, self._config, self.context):
                return function(*args, **kwargs)

        return timed


class AsyncAccessTimer(_Stopwatch):
    """:class:`AccessTimer` for asyncio: ``async with``, or a decorator of
    coroutine functions. A cancelled block is not recorded."""

    def __init__(
        self, run: Callable[[Op[Any]], Awaitable[Any]], config: Config, context: str
    ) -> None:
        super().__init__(config, context)
        self._run = run

    async def __aenter__(self) -> AsyncAccessTimer:
        self._start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        record = self._stop(kind)
        if record is not None:
            try:
                await self._run(record)
            except WebtierError as failure:
                FAILURES.failed(failure, f"e.g. {self.context!r}")

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
