"""Rate limiting of repeated log lines: during an outage every request fails
the same way, and a line per request would drown the log."""

from __future__ import annotations

import logging
import threading
import time


class Throttle:
    """Counts events and says when to log: the first at once, then at most
    once per ``every`` seconds (thread-safe)."""

    def __init__(self, every: float) -> None:
        self._every = every
        self._lock = threading.Lock()
        self._last = -float("inf")
        self._count = 0

    def due(self) -> int:
        """Count one event. Return how many events a line logged now stands
        for (this one and those not logged since the last line), or 0 when
        it is too soon to log."""
        with self._lock:
            self._count += 1
            now = time.monotonic()
            if now - self._last < self._every:
                return 0
            count, self._count, self._last = self._count, 0, now
            return count


class OutageLog:
    """The warning a capability logs when Redis fails it where the caller
    must not see the failure (a page served uncached, a duration not
    recorded): the first failure at once, then at most one line per
    ``every`` seconds with how many failed meanwhile, never a line per
    request. ``what`` says what the failure cost, on the logger ``logger``."""

    def __init__(self, logger: str, every: float, what: str) -> None:
        self._log = logging.getLogger(logger)
        self._throttle = Throttle(every)
        self._what = what

    def failed(self, error: BaseException, detail: str = "") -> None:
        """Count one failure; log it if a line is due. ``detail`` is added
        to the count (which request, what it was served)."""
        if count := self._throttle.due():
            self._log.warning(
                "%s (%d since the last report%s): %s",
                self._what,
                count,
                f", {detail}" if detail else "",
                error,
            )
