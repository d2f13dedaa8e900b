"""Tight loops, timed, in one process or in several side by side.

A benchmark describes its work as a *workload*: a picklable callable that
opens its own client, yields a :class:`Loop` and closes the client after the
run. Every process, the main one or a spawned worker, builds its own, so no
connection ever crosses a process boundary.

Processes start together at an agreed wall-clock instant and each times its
own window with ``perf_counter``; a run's rate is the sum of each process's
operations over its own elapsed time.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import os
import signal
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TypeAlias


def _nothing() -> None:
    return None


@dataclass(frozen=True, slots=True)
class Loop:
    """One process's work: ``step()`` runs ``ops_per_step`` logical operations
    and is called until the time is up; ``finish()`` then runs once, inside
    the timed window (a final flush belongs to the cost of what it flushes)."""

    step: Callable[[], object]
    ops_per_step: int = 1
    finish: Callable[[], object] = field(default=_nothing)


# Opens a client, yields a Loop, closes the client. To run in workers it must
# pickle: a module-level function, or functools.partial of one.
Workload: TypeAlias = Callable[[], AbstractContextManager[Loop]]


@dataclass(frozen=True, slots=True)
class ProcessRun:
    """What one process did in one run."""

    ops: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0


def _sleep_until(instant: float) -> None:
    delay = instant - time.time()
    if delay > 0:
        time.sleep(delay)


def time_loop(
    workload: Workload,
    seconds: float,
    start_at: float = 0.0,
    on_ready: Callable[[], object] = _nothing,
) -> ProcessRun:
    """Set the workload up, wait for ``start_at`` (wall clock), call
    ``on_ready``, then run it for ``seconds``; setup and teardown are not timed."""
    with workload() as loop:
        _sleep_until(start_at)
        on_ready()
        step, per_step, ops = loop.step, loop.ops_per_step, 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            step()
            ops += per_step
        loop.finish()
        elapsed = time.perf_counter() - started
    return ProcessRun(ops, elapsed)


def _worker_run(workload: Workload, seconds: float, start_at: float) -> tuple[int, ProcessRun]:
    return os.getpid(), time_loop(workload, seconds, start_at)


def _ignore_interrupts() -> None:
    # Ctrl-C reaches the whole process group: the bench's own process stops
    # the workers (Workers.close), which must not die each with a traceback.
    # They start with SIGINT blocked (Workers.__init__), so that one sent
    # while they import is dropped here, not raised.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _worker_pid(pause: float) -> int:
    # Held a moment, so that each idle worker takes one of these calls.
    time.sleep(pause)
    return os.getpid()


class Workers:
    """Spawned worker processes that run a workload side by side.

    Spawned rather than forked: a fork would copy the parent's sockets and
    threads. Workers live for the whole benchmark, so process start-up (and
    its imports) stays out of every measurement; :meth:`close` kills them.
    """

    # Seconds between handing out a run and its start: time enough for every
    # worker to build its client.
    LEAD = 0.5

    def __init__(self, processes: int) -> None:
        self.size = processes
        # Started with SIGINT blocked, which they inherit; a Ctrl-C meanwhile
        # reaches this process when it is unblocked.
        unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self._pool: multiprocessing.pool.Pool = multiprocessing.get_context("spawn").Pool(
                processes, initializer=_ignore_interrupts
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
        self._wait_until_all_started()

    def _wait_until_all_started(self) -> None:
        seen: set[int] = set()
        for _ in range(20):
            seen.update(self._pool.map(_worker_pid, [0.2] * self.size, chunksize=1))
            if len(seen) >= self.size:
                return
        raise RuntimeError(f"only {len(seen)} of {self.size} worker processes started")

    def run(
        self,
        workload: Workload,
        processes: int,
        seconds: float,
        before_start: Callable[[], object] = _nothing,
    ) -> list[ProcessRun]:
        """Run ``workload`` in ``processes`` workers at once; ``before_start``
        is called in this process just before they start."""
        if processes > self.size:
            raise ValueError(f"{processes} processes asked of a pool of {self.size}")
        start_at = time.time() + self.LEAD
        pending = [
            self._pool.apply_async(_worker_run, (workload, seconds, start_at))
            for _ in range(processes)
        ]
        _sleep_until(start_at - 0.02)
        before_start()
        results = [p.get(timeout=seconds + 120) for p in pending]
        if len({pid for pid, _ in results}) != processes:
            # A worker ran two of them one after the other: not side by side.
            raise RuntimeError("a benchmark run was not spread over distinct processes")
        return [run for _, run in results]

    def close(self) -> None:
        self._pool.terminate()
        self._pool.join()


def run_loop(
    workload: Workload,
    processes: int,
    seconds: float,
    workers: Workers | None,
    before_start: Callable[[], object] = _nothing,
) -> list[ProcessRun]:
    """One run in this process (``processes == 1``) or in ``workers``."""
    if processes == 1:
        return [time_loop(workload, seconds, on_ready=before_start)]
    if workers is None:
        raise ValueError("several processes need a Workers pool")
    return workers.run(workload, processes, seconds, before_start)
