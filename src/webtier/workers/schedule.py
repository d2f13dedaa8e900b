"""Worker jobs and when each runs next: the schedule of :mod:`webtier.workers.loop`.

Pure: the schedule reads the time it is given, and says how long to wait;
a failing job backs off (doubling up to ``BACKOFF_CAP``) and is logged once
when it starts failing, every ``REPORT_EVERY`` seconds while it lasts, and
once when it recovers.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from webtier._core.protocol import Op
from webtier.config import Config
from webtier.types import JobStep

log = logging.getLogger("webtier.worker")

BACKOFF_FIRST = 0.5  # seconds
BACKOFF_CAP = 30.0  # seconds
REPORT_EVERY = 30.0  # seconds between two "still failing" lines


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    step: Callable[[Config, int], Op[JobStep]]  # (config, pass number) -> one round


@dataclass(slots=True)
class _JobState:
    due: float = 0.0  # monotonic time of its next run
    passes: int = 0
    failures: int = 0
    failing_since: float | None = None
    reported: float = 0.0


@dataclass
class Schedule:
    """When each job runs next, and how its failures back off. Pure."""

    jobs: Sequence[Job]
    state: dict[str, _JobState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.state = {job.name: _JobState() for job in self.jobs}

    def due(self, now: float) -> list[Job]:
        return [job for job in self.jobs if self.state[job.name].due <= now]

    def succeeded(self, job: Job, step: JobStep, now: float) -> None:
        state = self.state[job.name]
        if state.failing_since is not None:
            log.warning(
                "%s: working again after %.0f s of failures", job.name, now - state.failing_since
            )
        state.due, state.failures, state.failing_since = now + step.delay, 0, None
        state.passes += 1
        if step.summary:  # a step that found nothing to do says nothing
            log.info("%s: %s", job.name, step.summary)

    def failed(self, job: Job, error: BaseException, now: float) -> None:
        state = self.state[job.name]
        state.failures += 1
        delay = min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** (state.failures - 1))
        state.due = now + delay
        if state.failing_since is None:
            state.failing_since = state.reported = now
            log.warning("%s: failed (%s); retrying with backoff", job.name, error)
        elif now - state.reported >= REPORT_EVERY:
            state.reported = now
            log.warning("%s: still failing after %d tries (%s)", job.name, state.failures, error)

    def wait(self, now: float) -> float:
        return max(0.0, min((s.due for s in self.state.values()), default=math.inf) - now)

    def each_tried_once(self) -> bool:
        """Every job has run a step, whether it succeeded or failed."""
        return all(s.passes > 0 or s.failures > 0 for s in self.state.values())
