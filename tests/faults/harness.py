"""The fault suite's machinery: loads that run while a fault strikes, and
what they saw.

A :class:`Loader` calls one step over and over, on a thread of its own (sync
steps) or as a task of the load's one event loop (asyncio steps), and keeps
when each step ended and how: ``"ok"`` (served by Redis), another word the
step returns (served without Redis, say), or the webtier error it raised
(``unavailable``, ``unknown``, ``partial``). Anything else is a bug: it is
kept and ends that loader, and the test fails on it.

Recovery is measured per loader: from the moment the fault was lifted to
the end of the first step that succeeded after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import webtier

PACE = 0.002  # seconds between two steps of a loader: room for the servers on 2 cores


def outcome_of(error: BaseException) -> str | None:
    """The outcome a webtier error stands for; None for any other error."""
    if isinstance(error, webtier.PartiallyApplied):
        return "partial"
    if isinstance(error, webtier.OutcomeUnknown):
        return "unknown"
    if isinstance(error, webtier.RedisUnavailable):
        return "unavailable"
    return None


@dataclass
class Ledger:
    """Writes of one kind, by what the caller was told: acknowledged, maybe
    applied (``unknown``), provably not applied (``refused``)."""

    acked: int = 0
    unknown: int = 0
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @contextlib.contextmanager
    def write(self, amount: int = 1) -> Iterator[None]:
        """Files ``amount`` by how the block ends (re-raising its error)."""
        try:
            yield
        except webtier.OutcomeUnknown:
            self.add(unknown=amount)
            raise
        except webtier.RedisUnavailable:
            self.add(refused=amount)
            raise
        self.add(acked=amount)

    def add(self, acked: int = 0, unknown: int = 0, refused: int = 0) -> None:
        with self._lock:
            self.acked += acked
            self.unknown += unknown
            self.refused += refused

    def bounds(self, stored: int, what: str) -> tuple[list[str], list[str]]:
        """(violations, losses) of ``acked <= stored <= acked + unknown``: more
        than could have been applied is a violation; less than acknowledged is
        a loss (which a failover may cause)."""
        violations, losses = [], []
        if stored > self.acked + self.unknown:
            violations.append(
                f"{what}: {stored} stored > {self.acked} acked + {self.unknown} unknown"
            )
        if stored < self.acked:
            losses.append(f"{what}: {stored} stored < {self.acked} acknowledged")
        return violations, losses

    def figures(self) -> dict[str, int]:
        return {"acked": self.acked, "unknown": self.unknown, "refused": self.refused}


Step = Callable[[], str]
AsyncStep = Callable[[], Awaitable[str]]


class Loader:
    """One step, run over and over while the load runs."""

    def __init__(self, name: str, step: Step | None = None, astep: AsyncStep | None = None):
        assert (step is None) != (astep is None)
        self.name, self.step, self.astep = name, step, astep
        self.outcomes: Counter[str] = Counter()
        self.events: list[tuple[float, str]] = []  # (time.monotonic() at its end, outcome)
        self.errors: list[BaseException] = []

    def _file(self, outcome: str) -> None:
        self.outcomes[outcome] += 1
        self.events.append((time.monotonic(), outcome))

    def run(self, stop: threading.Event) -> None:
        assert self.step is not None
        while not stop.is_set():
            try:
                outcome = self.step()
            except Exception as error:
                known = outcome_of(error)
                if known is None:
                    self.errors.append(error)
                    return
                outcome = known
            self._file(outcome)
            time.sleep(PACE)

    async def arun(self, stop: threading.Event) -> None:
        assert self.astep is not None
        while not stop.is_set():
            try:
                outcome = await self.astep()
            except Exception as error:
                known = outcome_of(error)
                if known is None:
                    self.errors.append(error)
                    return
                outcome = known
            self._file(outcome)
            await asyncio.sleep(PACE)

    def ok_since(self, moment: float) -> float | None:
        """The end of the first success after ``moment``, if any."""
        return next((t for t, outcome in self.events if outcome == "ok" and t >= moment), None)


class Load:
    """Runs loaders until the block ends: sync ones on threads, asyncio ones as
    tasks of one event loop on a thread, after ``asetup`` ran in that loop
    (asyncio clients must be made in the loop that uses them) and before
    ``ateardown``."""

    def __init__(
        self,
        loaders: list[Loader],
        asetup: Callable[[], Awaitable[Any]] | None = None,
        ateardown: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self.loaders = loaders
        self._asetup, self._ateardown = asetup, ateardown
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._loop_errors: list[BaseException] = []
        self._ready = threading.Event()

    def __enter__(self) -> Load:
        for loader in self.loaders:
            if loader.step is not None:
                thread = threading.Thread(target=loader.run, args=(self._stop,), daemon=True)
                self._threads.append(thread)
        if any(loader.astep is not None for loader in self.loaders) or self._asetup:
            self._threads.append(threading.Thread(target=self._loop_main, daemon=True))
        else:
            self._ready.set()
        for thread in self._threads:
            thread.start()
        assert self._ready.wait(30), "the asyncio loads never started"
        if self._loop_errors:
            raise self._loop_errors[0]
        return self

    def _loop_main(self) -> None:
        async def main() -> None:
            try:
                if self._asetup is not None:
                    await self._asetup()
            except BaseException as error:
                self._loop_errors.append(error)
                self._ready.set()
                return
            self._ready.set()
            try:
                await asyncio.gather(
                    *(
                        loader.arun(self._stop)
                        for loader in self.loaders
                        if loader.astep is not None
                    )
                )
            finally:
                if self._ateardown is not None:
                    await self._ateardown()

        try:
            asyncio.run(main())
        except BaseException as error:
            self._loop_errors.append(error)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        assert not any(t.is_alive() for t in self._threads), "a loader did not stop"

    @property
    def errors(self) -> list[BaseException]:
        return [*self._loop_errors, *(e for loader in self.loaders for e in loader.errors)]

    def wait(
        self, check: Callable[[], bool], what: Callable[[], str], timeout: float = 30.0
    ) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if self.errors:
                raise self.errors[0]
            assert time.monotonic() < deadline, what()
            time.sleep(0.01)

    def warm(self, successes: int = 3) -> None:
        """Until every loader succeeded ``successes`` times: connections
        kept, scripts loaded, caches filled."""
        self.wait(
            lambda: all(loader.outcomes["ok"] >= successes for loader in self.loaders),
            lambda: (
                "the loads never got going: "
                + ", ".join(f"{loader.name} {dict(loader.outcomes)}" for loader in self.loaders)
            ),
        )

    def recovered(self, since: float, timeout: float = 30.0) -> dict[str, float]:
        """Waits for a success of every loader after ``since``; seconds each took."""
        self.wait(
            lambda: all(loader.ok_since(since) is not None for loader in self.loaders),
            lambda: (
                "did not recover: "
                + ", ".join(
                    f"{loader.name} {dict(loader.outcomes)}"
                    for loader in self.loaders
                    if loader.ok_since(since) is None
                )
            ),
            timeout,
        )
        return {
            loader.name: max(0.0, (loader.ok_since(since) or since) - since)
            for loader in self.loaders
        }


def tally(loaders: list[Loader], window: tuple[float, float] | None = None) -> dict[str, int]:
    """The loaders' outcomes summed: all, or those of steps that ended in
    ``window`` (from, to)."""
    total: Counter[str] = Counter()
    for loader in loaders:
        if window is None:
            total.update(loader.outcomes)
        else:
            total.update(o for t, o in list(loader.events) if window[0] <= t <= window[1])
    return dict(total)


def eventually(call: Callable[[], Any], timeout: float = 20.0) -> Any:
    """``call()``, tried again while Redis is unavailable (for checks made
    after a fault, while a Cluster may still be settling)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except webtier.RedisUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
