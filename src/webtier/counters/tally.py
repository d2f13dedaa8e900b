"""The in-process sums of the counters' batched recorder.

``incr()`` only adds to an in-process sum (no I/O, well under a microsecond);
the sums go to Redis every ``flush_interval`` seconds, as soon as
``max_pending`` increments wait, and on ``close()``. Increments are summed per
counter and per *granule*, the longest slice inside one slice of every
precision (1 s with the book's precisions), so a flushed sum lands in exactly
the slices its increments would have reached one by one.

The flushing (a thread or a task, close, atexit, signals) is
:mod:`webtier._core.flush`, shared with the statistics' recorder and the
ranking's aggregator, which have other tallies or other flushes.

What a crash can lose: the increments not yet flushed, at most
``flush_interval`` seconds or ``max_pending`` increments of them. A flush whose
reply is lost is not sent again (it may have been applied: at most once); a
flush that provably did not reach Redis is kept and sent with the next one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from webtier._core.flush import Flusher, Tallies, settle
from webtier._core.keys import check_name
from webtier._core.protocol import Op
from webtier.counters import ops
from webtier.errors import WebtierError
from webtier.types import FlushReport


class Tally:
    """Increments summed per (counter, granule) in process: thread-safe, no I/O.

    :attr:`add` is a closure rather than a method, and does all its work in
    one call: on a busy web worker it runs for every counted event, and each
    Python call level costs as much as the sum itself.
    """

    def __init__(self, granule: int, max_pending: int, on_full: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._sums: dict[tuple[str, int], int] = {}
        self.add, self._pending, self._clear, self.close = self._make_add(
            granule, max_pending, on_full
        )

    def _make_add(
        self, granule: int, max_pending: int, on_full: Callable[[], None]
    ) -> tuple[Callable[..., None], Callable[[], int], Callable[[], None], Callable[[], None]]:
        # Everything add() touches is a local of this closure: on this path
        # each attribute lookup costs as much as the sum itself.
        sums, clock, max_count = self._sums, time.time, ops.MAX_COUNT
        acquire, release, get = self._lock.acquire, self._lock.release, self._sums.get
        checked: set[str] = set()
        pending = 0  # increments added since the last take()
        closed = False

        def add(name: str, count: int = 1, now: float | None = None) -> None:
            """Count ``count`` for counter ``name`` at ``now`` (default: now).
            Checked here; sent with the next flush."""
            nonlocal pending
            if closed:
                raise RuntimeError("this recorder is closed")
            # A str first: an unhashable name would make the lookup raise
            # TypeError where check_name raises InvalidInput.
            if name.__class__ is not str or name not in checked:
                check_name("name", name)
                if len(checked) > 100_000:  # bound the cache, not the names
                    checked.clear()
                checked.add(name)
            if count.__class__ is not int or count > max_count or count < -max_count:
                count = ops.check_count(count)
            at = clock() if now is None else ops.check_time(now)
            key = (name, int(at) if granule == 1 else int(at // granule) * granule)
            acquire()
            try:
                sums[key] = get(key, 0) + count
                pending += 1
                full = pending == max_pending
            finally:
                release()
            if full:
                on_full()

        def waiting() -> int:
            return pending

        def clear() -> None:  # with the lock held
            nonlocal pending
            pending = 0

        def close() -> None:
            """Refuse further increments (what waits can still be taken)."""
            nonlocal closed
            closed = True

        return add, waiting, clear, close

    @property
    def pending(self) -> int:
        return self._pending()

    def take(self) -> list[ops.Entry]:
        with self._lock:
            # Cleared in place: the add closure holds this very dict.
            sums = list(self._sums.items())
            self._sums.clear()
            self._clear()
        return [(name, total, float(at)) for (name, at), total in sums if total]

    def put_back(self, entries: Iterable[ops.Entry]) -> None:
        with self._lock:
            for name, total, at in entries:
                key = (name, int(at))
                self._sums[key] = self._sums.get(key, 0) + total

    def settle(self, results: list[tuple[list[ops.Entry], WebtierError | None]]) -> FlushReport:
        """Keep what did not reach Redis; count what was applied or lost."""
        return settle(results, self.put_back, "counter sums")


class CounterRecording(Flusher):
    """What both recorders share: sums per (counter, granule), added with
    ``incr()``, and their flush (a subclass may send the sums elsewhere)."""

    def _new_tally(self, max_pending: int, on_full: Callable[[], None]) -> Tallies:
        tally = Tally(self._config.counters.granule, max_pending, on_full)
        self.incr = tally.add
        return tally

    def _send(
        self, entries: list[ops.Entry]
    ) -> Op[list[tuple[list[ops.Entry], WebtierError | None]]]:
        """The operation a flush runs (subclasses send sums elsewhere)."""
        return ops.record_many(self._config, entries)
