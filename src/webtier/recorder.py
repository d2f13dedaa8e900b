"""Batched counter recording for hot counters.

``incr()`` only adds to an in-process sum (no I/O, well under a microsecond);
the sums go to Redis every ``flush_interval`` seconds, as soon as
``max_pending`` increments wait, and on ``close()``. Increments are summed per
counter and per *granule*, the longest slice inside one slice of every
precision (1 s with the book's precisions), so a flushed sum lands in exactly
the slices its increments would have reached one by one.

The flushing (a thread or a task, close, atexit, signals) is shared with the
statistics' recorder (:mod:`webtier.statsrecorder`), which has another
tally and another flush.

What a crash can lose: the increments not yet flushed, at most
``flush_interval`` seconds or ``max_pending`` increments of them. A flush whose
reply is lost is not sent again (it may have been applied: at most once); a
flush that provably did not reach Redis is kept and sent with the next one.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import signal
import threading
import time
import types
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Protocol, Self, TypeVar

from webtier._core.keys import check_name
from webtier._core.protocol import Op
from webtier._ops import counters
from webtier.config import Config
from webtier.config.validate import is_int as _is_int
from webtier.errors import ConfigError, OutcomeUnknown, RedisUnavailable, WebtierError
from webtier.types import FlushReport

# The longest flush interval: a day (a longer wait overflows some timers).
MAX_INTERVAL = 86400
log = logging.getLogger("webtier.recorder")
E = TypeVar("E")


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
        sums, clock, max_count = self._sums, time.time, counters.MAX_COUNT
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
                count = counters.check_count(count)
            at = clock() if now is None else counters.check_time(now)
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

    def take(self) -> list[counters.Entry]:
        with self._lock:
            # Cleared in place: the add closure holds this very dict.
            sums = list(self._sums.items())
            self._sums.clear()
            self._clear()
        return [(name, total, float(at)) for (name, at), total in sums if total]

    def put_back(self, entries: Iterable[counters.Entry]) -> None:
        with self._lock:
            for name, total, at in entries:
                key = (name, int(at))
                self._sums[key] = self._sums.get(key, 0) + total

    def settle(
        self, results: list[tuple[list[counters.Entry], WebtierError | None]]
    ) -> FlushReport:
        """Keep what did not reach Redis; count what was applied or lost."""
        return settle(results, self.put_back, "counter sums")


def settle(
    results: list[tuple[list[E], WebtierError | None]],
    put_back: Callable[[list[E]], None],
    what: str,
) -> FlushReport:
    """A flush's outcome, entry by entry: entries whose request provably did
    not reach Redis are put back, for the next flush; those whose outcome is
    unknown (a lost reply: never sent twice) or that Redis refused are lost,
    and logged as ``what``."""
    sent = kept = lost = 0
    for entries, error in results:
        if error is None:
            sent += len(entries)
        elif isinstance(error, RedisUnavailable) and not isinstance(error, OutcomeUnknown):
            put_back(entries)
            kept += len(entries)
        else:
            lost += len(entries)
            log.error("lost %d %s: %s", len(entries), what, error)
    return FlushReport(sent, kept, lost)


def check_interval(flush_interval: object) -> float:
    """``flush_interval`` if it is a valid one, else ConfigError."""
    if not (
        isinstance(flush_interval, int | float)
        and not isinstance(flush_interval, bool)
        and 0 < flush_interval <= MAX_INTERVAL  # refuses NaN too
    ):
        raise ConfigError(f"flush_interval must be > 0 seconds, at most {MAX_INTERVAL}")
    return float(flush_interval)


class Tallies(Protocol):
    """What a recorder's flushes need of its in-process tally: the entries
    waiting (taken away), and what to do with each flush's outcome."""

    def take(self) -> list[Any]: ...

    def settle(self, results: list[tuple[list[Any], WebtierError | None]]) -> FlushReport: ...

    def close(self) -> None: ...


class _RecorderBase:
    """What every batched recorder shares, sync or asyncio, counters or
    statistics: the interval and its checks, the tally and the flush's
    operation (both given by subclasses)."""

    _what = "counter"  # for the log

    def __init__(
        self,
        config: Config,
        flush_interval: float,
        max_pending: int,
        wake: threading.Event | asyncio.Event,
    ) -> None:
        check_interval(flush_interval)
        if not (_is_int(max_pending) and max_pending >= 1):
            raise ConfigError("max_pending must be an int >= 1")
        self._config, self._interval, self._wake = config, flush_interval, wake
        self._tally = self._new_tally(max_pending, wake.set)

    def _new_tally(self, max_pending: int, on_full: Callable[[], None]) -> Tallies:
        raise NotImplementedError

    def _send(self, entries: list[Any]) -> Op[list[tuple[list[Any], WebtierError | None]]]:
        """The operation a flush runs."""
        raise NotImplementedError


class _CounterTally(_RecorderBase):
    """Counters: sums per (counter, granule), added with ``incr()``."""

    def _new_tally(self, max_pending: int, on_full: Callable[[], None]) -> Tallies:
        tally = Tally(self._config.counters.granule, max_pending, on_full)
        self.incr = tally.add
        return tally

    def _send(
        self, entries: list[counters.Entry]
    ) -> Op[list[tuple[list[counters.Entry], WebtierError | None]]]:
        """The operation a flush runs (subclasses send sums elsewhere)."""
        return counters.record_many(self._config, entries)


class SyncFlusher(_RecorderBase):
    """The sync recorders' flushing: a daemon thread, ``close()``, atexit,
    signals. Subclasses give the tally and the flush's operation."""

    _wake: threading.Event

    def __init__(
        self,
        run: Callable[[Op[Any]], Any],
        config: Config,
        *,
        flush_interval: float = 0.1,
        max_pending: int = 10_000,
    ) -> None:
        super().__init__(config, flush_interval, max_pending, threading.Event())
        self._run = run
        self._flushing = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="webtier-recorder", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def flush(self) -> FlushReport:
        """Send what waits now; returns what happened to it."""
        with self._flushing:
            entries = self._tally.take()
            if not entries:
                return FlushReport(0, 0, 0)
            return self._tally.settle(self._run(self._send(entries)))

    def close(self) -> FlushReport:
        """Stop the thread and flush what is left (idempotent)."""
        atexit.unregister(self.close)
        self._tally.close()
        self._closed.set()
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        return self.flush()

    def flush_on_signals(self, *signals: int) -> None:
        """Flush before the process dies of these signals (default SIGTERM).

        Opt-in, main thread only. The previous handler still runs after the
        flush; where there was none, the process then exits with the signal's
        usual status."""
        for number in signals or (signal.SIGTERM,):
            previous = signal.getsignal(number)

            def handler(
                signum: int, frame: types.FrameType | None, previous: Any = previous
            ) -> None:
                self.close()
                if callable(previous):
                    previous(signum, frame)
                elif previous != signal.SIG_IGN:
                    signal.signal(signum, signal.SIG_DFL)
                    signal.raise_signal(signum)

            signal.signal(number, handler)

    def _loop(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._closed.is_set():
                return
            try:
                self.flush()
            except Exception:  # the thread must outlive a bad flush
                log.exception("%s flush failed", self._what)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncFlusher(_RecorderBase):
    """The asyncio recorders' flushing: a task, ``aclose()``, signals.
    Subclasses give the tally and the flush's operation."""

    _wake: asyncio.Event

    def __init__(
        self,
        run: Callable[[Op[Any]], Coroutine[Any, Any, Any]],
        config: Config,
        *,
        flush_interval: float = 0.1,
        max_pending: int = 10_000,
    ) -> None:
        super().__init__(config, flush_interval, max_pending, asyncio.Event())
        self._run = run
        self._flushing = asyncio.Lock()
        self._closed = False
        self._signalled: asyncio.Task[None] | None = None  # the close a signal started
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="webtier-recorder")

    async def flush(self) -> FlushReport:
        async with self._flushing:
            entries = self._tally.take()
            if not entries:
                return FlushReport(0, 0, 0)
            return self._tally.settle(await self._run(self._send(entries)))

    async def aclose(self) -> FlushReport:
        """Stop the task and flush what is left (idempotent). The task is
        woken, not cancelled: a flush under way completes."""
        self._closed = True
        self._tally.close()
        self._wake.set()
        await self._task
        return await self.flush()

    def flush_on_signals(self, *signals: int) -> None:
        """Flush before the process dies of these signals (default SIGTERM).

        Opt-in, from the loop's thread (the main thread). On the signal the
        recorder is closed in a task of the loop; then the previous handler
        runs, or, where there was none, the process exits with the signal's
        usual status."""
        loop = asyncio.get_running_loop()
        for number in signals or (signal.SIGTERM,):
            previous = signal.getsignal(number)

            async def close_then_die(signum: int = number, previous: Any = previous) -> None:
                try:
                    await self.aclose()
                finally:
                    loop.remove_signal_handler(signum)
                    if callable(previous):
                        previous(signum, None)
                    elif previous != signal.SIG_IGN:
                        signal.signal(signum, signal.SIG_DFL)
                        signal.raise_signal(signum)

            def handler(close: Callable[[], Coroutine[Any, Any, None]] = close_then_die) -> None:
                self._signalled = loop.create_task(close(), name="webtier-recorder-signal")

            loop.add_signal_handler(number, handler)

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval)
            self._wake.clear()
            if self._closed:
                return
            try:
                await self.flush()
            except Exception:
                log.exception("%s flush failed", self._what)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Recorder(_CounterTally, SyncFlusher):
    """Batched recording for the sync API; flushes from a daemon thread.

    Use it as a context manager or call :meth:`close`; an interpreter that
    exits normally flushes it too (atexit). A process killed by SIGTERM runs
    no atexit hook: call :meth:`flush_on_signals` from the main thread to
    flush first, or stop the process through your server's graceful shutdown.
    """


class AsyncRecorder(_CounterTally, AsyncFlusher):
    """Batched recording for the asyncio API; flushes from a task.

    Create it inside a running loop, call :meth:`incr` from that loop's
    thread, and ``await aclose()`` (or use ``async with``) before the loop ends.
    A process killed by SIGTERM ends no loop gracefully: call
    :meth:`flush_on_signals` to flush first.
    """
