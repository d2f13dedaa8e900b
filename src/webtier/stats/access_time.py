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

import time

from webtier._core.keys import check_name
from webtier._core.protocol import Op
from webtier._core.throttle import OutageLog
from webtier.config import ACCESS_TIME, Config
from webtier.stats import ops
from webtier.types import Recorded

REPORT_EVERY = 30.0  # seconds between two log lines about failing records


def failure_log() -> OutageLog:
    """The log of failures to record an access time (one per process)."""
    return OutageLog("webtier.stats", REPORT_EVERY, "access time not recorded")


FAILURES = failure_log()


class Stopwatch:
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
        return ops.record(self._config, self.context, ACCESS_TIME, seconds, failed=failed)
