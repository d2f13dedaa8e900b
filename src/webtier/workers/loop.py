"""The worker loop: jobs run on a schedule, with warm and cold shutdown.

The jobs are :mod:`webtier.workers.jobs`. The loop is written once, as a
generator (:func:`_program`)
that yields what it needs done (run a step, beat, wait); :class:`Worker`
drives it with blocking calls, :class:`AsyncWorker` with asyncio.

Shutdown: :meth:`Worker.request_stop` is *warm*: the step under way finishes,
the worker unregisters and returns. *Cold* shutdown interrupts the step:
for the sync worker, raise :class:`ColdStop` in its thread (the CLI does so
from its signal handler on a second signal); for the asyncio worker, call
:meth:`AsyncWorker.request_force_stop`. Library code never installs signal
handlers; the CLI does.

A step that fails because Redis is away is retried with a growing backoff
(up to 30 s), logged once when it starts failing, then every 30 s while it
lasts, and once when it recovers; redis-py reconnects by itself.

The schedule, and how a failing job backs off, is :mod:`webtier.workers.schedule`.
Before its first job a worker checks the deployment's settings
(:mod:`webtier.deployment.ops`; stores them if it is the first writer) and
refuses to run against others: :class:`~webtier.errors.SettingsMismatch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from webtier import deployment
from webtier._core.protocol import Op
from webtier.config import Config
from webtier.errors import ConfigError, RedisUnavailable, WebtierError
from webtier.types import JobStep
from webtier.workers import liveness
from webtier.workers.jobs import JOBS
from webtier.workers.schedule import Job, Schedule

log = logging.getLogger("webtier.worker")
T = TypeVar("T")


# What a worker runs on: a tier (webtier.sync.WebTier, webtier.aio.WebTier),
# or anything with its config and a transport that runs operations. Named
# here, so that the workers' package need not import the facades that
# assemble its part.


class _Runs(Protocol):
    def run(self, op: Op[T]) -> T: ...


class _RunsAsync(Protocol):
    async def run(self, op: Op[T]) -> T: ...


class Tier(Protocol):
    @property
    def config(self) -> Config: ...

    @property
    def transport(self) -> _Runs: ...


class AsyncTier(Protocol):
    @property
    def config(self) -> Config: ...

    @property
    def transport(self) -> _RunsAsync: ...


class ColdStop(BaseException):
    """Raised in a sync worker's thread to stop it at once (the CLI raises it
    from its signal handler on the second SIGINT/SIGTERM)."""


# -- the loop, written once ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Run:
    job: Job
    pass_number: int


@dataclass(frozen=True, slots=True)
class _Beat:
    pass


@dataclass(frozen=True, slots=True)
class _Wait:
    seconds: float


def _check_settings(cfg: Config, pass_number: int) -> Op[JobStep]:
    yield from deployment.ops.check(cfg)
    return JobStep(0.0, "")


SETTINGS = Job("settings", _check_settings)


def _settle(stopping: Callable[[], bool]) -> Generator[_Run | _Wait, Any, None]:
    """Before any job: the deployment's settings, stored if this worker is
    the first writer, else checked; an outage is waited out, a mismatch
    (a ConfigError) ends the worker."""
    schedule = Schedule([SETTINGS])
    while not stopping():
        outcome = yield _Run(SETTINGS, 0)
        if isinstance(outcome, JobStep):
            schedule.succeeded(SETTINGS, outcome, time.monotonic())  # logs a recovery
            return
        if isinstance(outcome, ConfigError):
            raise outcome
        schedule.failed(SETTINGS, outcome, time.monotonic())
        yield _Wait(schedule.wait(time.monotonic()))


def _program(
    schedule: Schedule, heartbeat: float, once: bool, stopping: Callable[[], bool]
) -> Generator[_Run | _Beat | _Wait, Any, None]:
    """The worker's loop. ``_Run`` is answered with a JobStep or the exception
    the step raised."""
    yield from _settle(stopping)
    next_beat = 0.0
    while not stopping():
        now = time.monotonic()
        if now >= next_beat:
            yield _Beat()
            next_beat = now + heartbeat
        for job in schedule.due(now):
            if stopping():
                return
            outcome = yield _Run(job, schedule.state[job.name].passes)
            if isinstance(outcome, JobStep):
                schedule.succeeded(job, outcome, time.monotonic())
            elif not stopping():  # a step cut short by a cold stop is no failure
                schedule.failed(job, outcome, time.monotonic())
        # --once is a one-shot run (cron, a deploy step): each job's step
        # runs once and a failure is reported by the caller, not retried
        # with backoff, which would never end while a source stays broken.
        if once and schedule.each_tried_once():
            return
        now = time.monotonic()
        yield _Wait(min(schedule.wait(now), max(0.0, next_beat - now)))


def _new_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _step_error(error: BaseException) -> None:
    if not isinstance(error, WebtierError):  # a bug, not an outage: keep its traceback
        log.error("step raised", exc_info=error)


class _WorkerBase:
    """What the sync and asyncio workers share: identity, jobs, stop event."""

    def __init__(
        self,
        config: Config,
        jobs: Sequence[Job] | None,
        heartbeat: float,
        once: bool,
        worker_id: str | None,
        stop: threading.Event | asyncio.Event,
    ) -> None:
        self.config = config
        # None is every job; () is none (a worker that only announces itself).
        self.jobs = list(JOBS.values() if jobs is None else jobs)
        self.heartbeat, self.once = heartbeat, once
        self.id = worker_id or _new_id()
        self._stop = stop  # set it to stop warm
        self._started = time.time()
        self._last = ("", 0.0, "")  # job, end, outcome of the last step: told in heartbeats
        # Jobs whose latest step failed, with its error (what --once reports).
        self.failures: dict[str, BaseException] = {}

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def request_stop(self) -> None:
        """Warm stop: finish the step under way, then return from ``run``."""
        self._stop.set()

    def _program(self) -> Generator[_Run | _Beat | _Wait, Any, None]:
        self._started = time.time()
        return _program(Schedule(self.jobs), self.heartbeat, self.once, self._stop.is_set)

    def _beat(self) -> Op[None]:
        jobs = tuple(j.name for j in self.jobs)
        info = liveness.WorkerInfo(
            self.id, socket.gethostname(), os.getpid(), self._started, jobs, time.time(),
            *self._last,
        )  # fmt: skip
        return liveness.heartbeat(self.config, info, 3 * self.heartbeat)

    def _note(self, action: _Run, outcome: JobStep | BaseException) -> JobStep | BaseException:
        said = outcome.summary if isinstance(outcome, JobStep) else f"failed: {outcome}"
        if isinstance(outcome, JobStep):
            self.failures.pop(action.job.name, None)
        else:
            self.failures[action.job.name] = outcome
        if said or not self._last[0]:  # an idle step keeps the last news
            self._last = (action.job.name, time.time(), said[:200])
        return outcome


class Worker(_WorkerBase):
    """Runs jobs on a sync :class:`~webtier.sync.WebTier` until stopped."""

    _stop: threading.Event

    def __init__(
        self,
        tier: Tier,
        jobs: Sequence[Job] | None = None,
        *,
        heartbeat: float = 5.0,
        once: bool = False,
        worker_id: str | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        super().__init__(tier.config, jobs, heartbeat, once, worker_id, stop or threading.Event())
        self.tier = tier
        self._running_in: threading.Thread | None = None

    def request_force_stop(self) -> None:
        """Cold stop: called on the thread running :meth:`run` (a signal
        handler of the main thread), it raises :class:`ColdStop` there, cutting
        the step under way short; from another thread, a thread cannot be
        interrupted, so it stops warm."""
        self._stop.set()
        if self._running_in is threading.current_thread():
            raise ColdStop

    def run(self) -> None:
        program = self._program()
        self._running_in = threading.current_thread()
        try:
            answer: Any = None
            while True:
                try:
                    action = program.send(answer)
                except StopIteration:
                    return
                answer = self._carry_out(action)
        finally:
            self._running_in = None
            with contextlib.suppress(WebtierError):
                self.tier.transport.run(liveness.retire(self.tier.config, self.id))

    def _carry_out(self, action: _Run | _Beat | _Wait) -> Any:
        if isinstance(action, _Run):
            try:
                step = self.tier.transport.run(
                    action.job.step(self.tier.config, action.pass_number)
                )
            except Exception as error:  # the worker outlives any failed step
                _step_error(error)
                return self._note(action, error)
            return self._note(action, step)
        if isinstance(action, _Beat):
            with contextlib.suppress(RedisUnavailable):
                self.tier.transport.run(self._beat())
            return None
        self._stop.wait(action.seconds)
        return None


class AsyncWorker(_WorkerBase):
    """Runs jobs on an asyncio :class:`~webtier.aio.WebTier` until stopped."""

    _stop: asyncio.Event

    def __init__(
        self,
        tier: AsyncTier,
        jobs: Sequence[Job] | None = None,
        *,
        heartbeat: float = 5.0,
        once: bool = False,
        worker_id: str | None = None,
    ) -> None:
        super().__init__(tier.config, jobs, heartbeat, once, worker_id, asyncio.Event())
        self.tier = tier
        self._step: asyncio.Task[Any] | None = None

    def request_force_stop(self) -> None:
        """Cold stop: cancel the step under way, then return from :meth:`run`."""
        self._stop.set()
        if self._step is not None:
            self._step.cancel()

    async def run(self) -> None:
        program = self._program()
        try:
            answer: Any = None
            while True:
                try:
                    action = program.send(answer)
                except StopIteration:
                    return
                answer = await self._carry_out(action)
        finally:
            with contextlib.suppress(WebtierError):
                await self.tier.transport.run(liveness.retire(self.tier.config, self.id))

    async def _carry_out(self, action: _Run | _Beat | _Wait) -> Any:
        if isinstance(action, _Run):
            self._step = asyncio.ensure_future(
                self.tier.transport.run(action.job.step(self.tier.config, action.pass_number))
            )
            try:
                return self._note(action, await self._step)
            except asyncio.CancelledError:
                if self._stop.is_set() and self._step.cancelled():
                    return asyncio.CancelledError()  # cold stop: the loop sees stopping()
                raise
            except Exception as error:
                _step_error(error)
                return self._note(action, error)
            finally:
                self._step = None
        if isinstance(action, _Beat):
            with contextlib.suppress(RedisUnavailable):
                await self.tier.transport.run(self._beat())
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), action.seconds)
        return None
