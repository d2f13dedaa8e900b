# Generated from src/webtier/stats/aio.py by scripts/unasync.py: do not edit.
"""The statistics' sync API: the ``tier.stats`` part, the batched
recorder and the access-time timer it opens.
It is generated from :mod:`webtier.stats.aio` (scripts/unasync.py)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from webtier._core.facade import Part, sync_op
from webtier._core.flush import SyncFlusher
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

    record = sync_op(ops.record)
    get = sync_op(ops.get)
    get_many = sync_op(ops.get_many)
    series = sync_op(ops.series)
    series_many = sync_op(ops.series_many)
    slowest = sync_op(ops.slowest)

    def access_time(self, context: str) -> AccessTimer:
        """Time a block (``with``) or each call of a function (decorator)
        as ``context``'s ``AccessTime``, even when it raises: see
        :mod:`webtier.stats.access_time`."""
        return AccessTimer(self._run, self._config, context)

    def recorder(self, *, flush_interval: float = 0.1, max_pending: int = 10_000) -> StatsRecorder:
        """A batched recorder of statistics:
        one script call per (context, type) per flush instead of a round
        trip per value; see :mod:`webtier.stats.tally`."""
        return StatsRecorder(
            self._run, self._config, flush_interval=flush_interval, max_pending=max_pending
        )


class StatsRecorder(StatsRecording, SyncFlusher):
    """Batched statistics for the sync API, flushed from a daemon thread: open one
    with ``tier.stats.recorder()``; ``record(context, type, value,
    failed=False)`` adds a value, with no I/O. Close it with
    ``close()`` (or ``with``); :meth:`flush_on_signals` flushes
    before SIGTERM."""


class AccessTimer(access_time.Stopwatch):
    """Times a block (``with``) or each call of a function
    (decorator) and records it as ``context``'s ``AccessTime``. One block at
    a time per timer; decorated functions may run concurrently."""

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
                access_time.FAILURES.failed(failure, f"e.g. {self.context!r}")

    def __call__(self, function: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(function)
        def timed(*args: P.args, **kwargs: P.kwargs) -> T:
            with AccessTimer(self._run, self._config, self.context):
                return function(*args, **kwargs)

        return timed
