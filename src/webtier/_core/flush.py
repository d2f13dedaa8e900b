"""The batching machinery every in-process helper shares: what waits in a
tally is sent by a flush from a thread (sync API) or a task (asyncio API)
every ``flush_interval`` seconds, as soon as ``max_pending`` entries wait,
and on close; and a step repeated in the background (a refreshed copy).

A capability gives a tally (:class:`Tallies`: its entries, taken away, and
what to do with a flush's outcome) and the operation a flush runs; the
counters' recorder, the ranking's aggregator and the statistics' recorder
are each a tally of their own over :class:`SyncFlusher` or
:class:`AsyncFlusher`. The thread-or-task difference lives here alone, so
their asyncio classes are written once and their sync twins generated
(scripts/unasync.py).

What a crash can lose: the entries not yet flushed, at most
``flush_interval`` seconds or ``max_pending`` of them. A flush whose reply is
lost is not sent again (it may have been applied: at most once); a flush
that provably did not reach Redis is kept and sent with the next one.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import signal
import threading
import types
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, Self, TypeVar

from webtier._core.protocol import Op
from webtier.config import Config
from webtier.config.validate import is_int
from webtier.errors import ConfigError, OutcomeUnknown, RedisUnavailable, WebtierError
from webtier.types import FlushReport

# The longest flush interval: a day (a longer wait overflows some timers).
MAX_INTERVAL = 86400
log = logging.getLogger("webtier.recorder")
E = TypeVar("E")


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
    """What a flush needs of an in-process tally: the entries waiting (taken
    away), and what to do with each flush's outcome."""

    def take(self) -> list[Any]: ...

    def settle(self, results: list[tuple[list[Any], WebtierError | None]]) -> FlushReport: ...

    def close(self) -> None: ...


class Flusher:
    """What every flusher shares, sync or asyncio: the interval and its
    checks, the tally and the flush's operation (both given by a
    capability's subclass)."""

    _what = "counter"  # for the log

    def __init__(
        self,
        config: Config,
        flush_interval: float,
        max_pending: int,
        wake: threading.Event | asyncio.Event,
    ) -> None:
        check_interval(flush_interval)
        if not (is_int(max_pending) and max_pending >= 1):
            raise ConfigError("max_pending must be an int >= 1")
        self._config, self._interval, self._wake = config, flush_interval, wake
        self._tally = self._new_tally(max_pending, wake.set)

    def _new_tally(self, max_pending: int, on_full: Callable[[], None]) -> Tallies:
        raise NotImplementedError

    def _send(self, entries: list[Any]) -> Op[list[tuple[list[Any], WebtierError | None]]]:
        """The operation a flush runs."""
        raise NotImplementedError


class SyncFlusher(Flusher):
    """Flushes from a daemon thread.

    Use it as a context manager or call :meth:`close`; an interpreter that
    exits normally flushes it too (atexit). A process killed by SIGTERM runs
    no atexit hook: call :meth:`flush_on_signals` from the main thread to
    flush first, or stop the process through your server's graceful shutdown.
    """

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


class AsyncFlusher(Flusher):
    """Flushes from a task of the running loop.

    Create it inside a running loop, add to it from that loop's thread, and
    ``await aclose()`` (or use ``async with``) before the loop ends. A
    process killed by SIGTERM ends no loop gracefully: call
    :meth:`flush_on_signals` to flush first.
    """

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
        """Send what waits now; returns what happened to it."""
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
        flusher is closed in a task of the loop; then the previous handler
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


# -- a step repeated in the background ---------------------------------------------------


class SyncPeriodic:
    """Runs ``step`` at once, then every ``every`` seconds, in a daemon
    thread, until closed. ``step`` must not raise."""

    def __init__(self, step: Callable[[], object], every: float, name: str) -> None:
        self._step, self._every = step, every
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop repeating; returns once a step under way has ended."""
        self._closed.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _loop(self) -> None:
        while not self._closed.is_set():
            self._step()
            self._closed.wait(self._every)


class AsyncPeriodic:
    """Runs ``step`` at once, then every ``every`` seconds, in a task of the
    running loop, until closed. ``step`` must not raise."""

    def __init__(self, step: Callable[[], Awaitable[object]], every: float, name: str) -> None:
        self._step, self._every = step, every
        self._closed = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name=name)

    async def aclose(self) -> None:
        """Stop repeating; returns once a step under way has ended."""
        self._closed.set()
        await self._task

    async def _loop(self) -> None:
        while not self._closed.is_set():
            await self._step()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), self._every)
