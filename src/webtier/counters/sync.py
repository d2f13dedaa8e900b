# Generated from src/webtier/counters/aio.py by scripts/unasync.py: do not edit.
"""The counters' sync API: the ``tier.counters`` part and the batched
recorder it opens. It is generated from :mod:`webtier.counters.aio` (scripts/unasync.py)."""

from __future__ import annotations

from webtier._core.facade import Part, sync_op
from webtier._core.flush import SyncFlusher
from webtier.counters import ops
from webtier.counters.tally import CounterRecording


class Counters(Part):
    """Time-series counters at several precisions (Redis in Action 5.2.1)."""

    record = sync_op(ops.record)
    get = sync_op(ops.get)
    get_many = sync_op(ops.get_many)
    names = sync_op(ops.names)
    clean = sync_op(ops.clean)

    def recorder(self, *, flush_interval: float = 0.1, max_pending: int = 10_000) -> Recorder:
        """A batched recorder for hot counters:
        see :class:`Recorder`."""
        return Recorder(
            self._run, self._config, flush_interval=flush_interval, max_pending=max_pending
        )


class Recorder(CounterRecording, SyncFlusher):
    """Batched counter increments for the sync API, flushed from a daemon thread:
    open one with ``tier.counters.recorder()``; ``incr(name, count=1,
    now=None)`` adds to an in-process sum, with no I/O. Close it with
    ``close()`` (or ``with``); :meth:`flush_on_signals` flushes
    before SIGTERM."""
