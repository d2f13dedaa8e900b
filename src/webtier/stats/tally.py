"""Batched statistics: values summed in process, merged into Redis in
batches (:class:`~webtier.stats.AsyncStatsRecorder`, :class:`~webtier.stats.StatsRecorder`).

``record(context, type, value)`` checks its arguments and adds the value to
the in-process batch of its (context, type), under a lock, with no I/O
(a couple of microseconds); every ``flush_interval`` seconds, as soon as
``max_pending`` values wait, and on ``close()``, each batch is merged into
its record with one script call, all of a node's in one round trip
(``stats_merge.lua``). A busy web server's per-request access time thus
costs Redis one call per (route, flush) instead of one round trip per request.

What it trades, as the counters' :class:`~webtier.counters.Recorder`:

* values reach Redis up to ``flush_interval`` late, and land in the period
  the *server's* clock is in when they arrive: a value recorded in the last
  ``flush_interval`` of an hour may count in the next;
* a crash loses the values not yet flushed (at most ``flush_interval`` of
  them); a flush whose reply is lost is not sent again (at most once); a
  flush that provably did not reach Redis is kept and merged into the next.

Nothing else changes: count, sum, min, max, errors and every histogram bucket
come out identical to recording the values one by one, and mean and standard
deviation equal to the last few bits of a double (see docs/stats.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from webtier._core.flush import Tallies, settle
from webtier._core.keys import check_name, check_stat_type
from webtier._core.protocol import Op
from webtier.config import Config
from webtier.stats import ops
from webtier.stats.batch import Batch, Entry, Results, merge_many
from webtier.stats.histogram import bucket_of
from webtier.types import FlushReport

# (context, type) pairs checked once and remembered; beyond this many, the
# memory is cleared (it bounds the cache, not the names).
_CHECKED_MAX = 100_000


class StatsTally:
    """Batches per (context, type) in process: thread-safe, no I/O."""

    def __init__(self, config: Config, max_pending: int, on_full: Callable[[], None]) -> None:
        self._settings = config.stats
        self._max_pending, self._on_full = max_pending, on_full
        self._lock = threading.Lock()
        self._batches: dict[tuple[str, str], Batch] = {}
        self._checked: set[tuple[str, str]] = set()
        self.pending = 0  # values added since the last take()
        self._closed = False

    def add(self, context: str, type: str, value: float, *, failed: bool = False) -> None:
        """Add ``value`` to the stats of (``context``, ``type``), ``failed``
        also counting it as an error. Checked here; merged by the next flush."""
        if self._closed:
            raise RuntimeError("this recorder is closed")
        key = (context, type)
        # Both str first: an unhashable argument would make the lookup raise
        # TypeError where the checks raise InvalidInput.
        if context.__class__ is not str or type.__class__ is not str or key not in self._checked:
            check_name("context", context)
            check_stat_type(type)
            if len(self._checked) > _CHECKED_MAX:
                self._checked.clear()
            self._checked.add(key)
        settings = self._settings
        number = float(ops.check_value(value, type, settings))
        bucket = bucket_of(number, settings.sub_buckets) if settings.histograms else None
        with self._lock:
            batch = self._batches.get(key)
            if batch is None:
                batch = self._batches[key] = Batch()
            batch.add(number, bool(failed), bucket)
            self.pending += 1
            full = self.pending == self._max_pending
        if full:
            self._on_full()

    def take(self) -> list[Entry]:
        with self._lock:
            batches, self._batches = self._batches, {}
            self.pending = 0
        return [(context, type, batch) for (context, type), batch in batches.items()]

    def put_back(self, entries: list[Entry]) -> None:
        with self._lock:
            for context, type, batch in entries:
                newer = self._batches.get((context, type))
                if newer is not None:
                    batch.merge(newer)
                self._batches[(context, type)] = batch

    def settle(self, results: Results) -> FlushReport:
        """Keep what did not reach Redis; count what was merged or lost."""
        return settle(results, self.put_back, "statistics' batches")

    def close(self) -> None:
        """Refuse further values (what waits can still be taken)."""
        self._closed = True


class StatsRecording:
    """What both statistics recorders share: their tally and their flush."""

    _what = "statistics"
    _config: Config

    def _new_tally(self, max_pending: int, on_full: Callable[[], None]) -> Tallies:
        tally = StatsTally(self._config, max_pending, on_full)
        self.record = tally.add
        return tally

    def _send(self, entries: list[Entry]) -> Op[Results]:
        return merge_many(self._config, entries)
