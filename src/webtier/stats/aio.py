"""The statistics' asyncio API: the ``tier.stats`` part, the batched
recorder and the access-time timer it opens.
:mod:`webtier.stats.sync` is generated from this module (scripts/unasync.py)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from webtier._core.facade import Part, async_op
from webtier._core.flush import AsyncFlusher
from webtier._core.protocol import Op
from webtier.config import Config
from webtier.errors import WebtierError
from webtier.stats import access_time, ops
from webtier.stats.tally import StatsRecording

P = ParamSpec("P")
T = TypeVar("T")


class Stats(Part):
    """Statistics per context, type and period, with percentiles and a
    ranking of the slowest contexts (Redis in Action 5.2.2-5.2.3)."""

    record = async_op(ops.record)
    get = async_op(ops.get)
    get_many = async_op(ops.get_many)
    series = async_op(ops.series)
    series_many = async_op(ops.series_many)
    slowest = async_op(ops.slowest)

    def access_time(self, context: str) -> AsyncAccessTimer:
        """Time a block (``async with``) or each call of a coroutine function (decorator)
        as ``context``'s ``AccessTime``, even when it raises: see
        :mod:`webtier.stats.access_time`."""
        return AsyncAccessTimer(self._run, self._config, context)

    def recorder(
        self, *, flush_interval: float = 0.1, max_pending: int = 10_000
    ) -> AsyncStatsRecorder:
        """A batched recorder of statistics (create it in a running loop):
        one script call per (context, type) per flush instead of a round
        trip per value; see :mod:`webtier.stats.tally`."""
        return AsyncStatsRecorder(
            self._run, self._config, flush_interval=flush_interval, max_pending=max_pending
        )


class AsyncStatsRecorder(StatsRecording, AsyncFlusher):
    """Batched statistics for the asyncio API, flushed from a task: open one
    with ``tier.stats.recorder()``; ``record(context, type, value,
    failed=False)`` adds a value, with no I/O. Close it with
    ``await aclose()`` (or ``async with``); :meth:`flush_on_signals` flushes
    before SIGTERM."""


class AsyncAccessTimer(access_time.Stopwatch):
    """Times a block (``async with``) or each call of a coroutine function
    (decorator) and records it as ``context``'s ``AccessTime``. One block at
    a time per timer; decorated functions may run concurrently. A cancelled
    block is not recorded."""

    def __init__(
        self, run: Callable[[Op[Any]], Coroutine[Any, Any, Any]], config: Config, context: str
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
                access_time.FAILURES.failed(failure, f"e.g. {self.context!r}")

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
