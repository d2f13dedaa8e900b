"""The counters' asyncio API: the ``tier.counters`` part and the batched
recorder it opens. :mod:`webtier.counters.sync` is generated from this
module (scripts/unasync.py)."""

from __future__ import annotations

from webtier._core.facade import Part, async_op
from webtier._core.flush import AsyncFlusher
from webtier.counters import ops
from webtier.counters.tally import CounterRecording


class Counters(Part):
    """Time-series counters at several precisions (Redis in Action 5.2.1)."""

    record = async_op(ops.record)
    get = async_op(ops.get)
    get_many = async_op(ops.get_many)
    names = async_op(ops.names)
    clean = async_op(ops.clean)

    def recorder(self, *, flush_interval: float = 0.1, max_pending: int = 10_000) -> AsyncRecorder:
        """A batched recorder for hot counters (create it in a running loop):
        see :class:`AsyncRecorder`."""
        return AsyncRecorder(
            self._run, self._config, flush_interval=flush_interval, max_pending=max_pending
        )


class AsyncRecorder(CounterRecording, AsyncFlusher):
    """Batched counter increments for the asyncio API, flushed from a task:
    open one with ``tier.counters.recorder()``; ``incr(name, count=1,
    now=None)`` adds to an in-process sum, with no I/O. Close it with
    ``await aclose()`` (or ``async with``); :meth:`flush_on_signals` flushes
    before SIGTERM."""
