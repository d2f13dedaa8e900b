"""The workers' jobs: one round of each capability's maintenance, as an
operation that says when it wants to run again (:class:`~webtier.types.JobStep`).

A :class:`~webtier.workers.schedule.Job` is a pure step: given the config and
its pass number, an operation that does one round and says when it wants to
run again. :data:`JOBS` are the jobs ``webtier worker`` runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from webtier import counters, ranking, rows, sessions
from webtier._core.checks import check_limit, check_real
from webtier._core.protocol import Op
from webtier.config import Config
from webtier.errors import ConfigError
from webtier.rows.source import Source, check_source
from webtier.types import JobStep
from webtier.workers.schedule import Job

log = logging.getLogger("webtier.worker")


# -- counters ----------------------------------------------------------------------------


def _clean_counters(cfg: Config, pass_number: int) -> Op[JobStep]:
    report = yield from counters.ops.clean(cfg, pass_number)
    summary = (
        f"pass {pass_number}: {report.counters} counters, {report.samples_dropped} samples "
        f"dropped, {report.counters_unlisted} unlisted in {report.seconds:.2f} s"
    )
    # The book: a pass a minute, less the time the pass took, at least 1 s apart.
    return JobStep(max(cfg.counters.clean_interval - report.seconds, 1.0), summary)


# -- row cache ---------------------------------------------------------------------------


def _refresh_rows(cfg: Config, pass_number: int) -> Op[JobStep]:
    settings = cfg.rows
    if not settings.sources:
        return JobStep(60.0, "" if pass_number else "no row sources configured; idle")
    done = yield from rows.refresh.refresh_round(cfg)
    for problem in done.problems:
        log.warning("rows: %s (retried with backoff)", problem)
    report = done.report
    if done.more:
        delay = 0.0
    elif done.next_due is not None and done.now is not None:
        # Sleep until the next row is due, but poll at least every `poll`:
        # rows scheduled meanwhile are due at once.
        delay = min(settings.poll, max(0.0, (done.next_due - done.now) / 1000))
    else:
        delay = settings.poll
    if not (report.claimed or report.dropped):
        return JobStep(delay, "")
    summary = (
        f"{report.claimed} rows in {report.seconds:.3f} s: {report.stored} stored, "
        f"{report.removed} removed, {report.fenced} fenced, {report.failed} failed, "
        f"{report.dropped} dropped"
    )
    return JobStep(delay, summary)


# Rows a warm-up step reads and loads at once: a bounded reply and query.
WARM_CHUNK = 500


def warm_rows(source: Source, top: int, every: float = 10.0) -> Job:
    """A job that keeps the rows of the ``top`` most viewed items cached
    (the view ranking's item names are ``source``'s row ids), loading the
    ones that are not every ``every`` seconds: the rows of popular items
    are in Redis before their views, not read through by the first one."""
    check_source(source)
    check_limit("top", top, 1)
    check_real("every", every, 0.1, 86_400)

    def step(cfg: Config, pass_number: int) -> Op[JobStep]:
        names = yield from ranking.ops.top_items(cfg, top)
        loaded = 0
        for start in range(0, len(names), WARM_CHUNK):
            loaded += yield from rows.ops.warm(cfg, source, names[start : start + WARM_CHUNK])
        summary = f"{loaded} rows of the top {len(names)} items loaded" if loaded else ""
        return JobStep(every, summary)

    return Job(f"warm-rows:{source.name}", step)


# -- item view ranking -------------------------------------------------------------------

# Seconds past the server's period boundary a rescaler wakes: a worker whose
# clock runs a little ahead finds the period not begun yet and tries again.
RESCALE_SLACK = 0.05


def _rescale_views(cfg: Config, pass_number: int) -> Op[JobStep]:
    report = yield from ranking.ops.rescale(cfg)
    delay = max(report.next_in, 0.0) + RESCALE_SLACK
    if not report.done:  # another worker rescaled this period
        return JobStep(delay, "")
    summary = (
        f"period from {report.period}: kept {report.left} items, removed {report.removed}, "
        f"counts x{cfg.ranking.factor:g}"
    )
    return JobStep(delay, summary)


# -- sessions and carts ---------------------------------------------------------------------

# Steps per pass before the worker gets a turn to beat and to check for a stop.
SESSION_STEPS = 100
# The counter of the sessions the cleaner removed.
SESSIONS_CLEANED = "sessions:cleaned"


def _clean_sessions(cfg: Config, pass_number: int) -> Op[JobStep]:
    report = yield from sessions.cleaner.clean(cfg, max_steps=SESSION_STEPS)
    if report.deleted:
        # The cleaner's rate, for the dashboard and the metrics: one more
        # round trip per pass that removed something, none when idle.
        yield from counters.ops.record(cfg, SESSIONS_CLEANED, report.deleted)
    if not (report.deleted or report.spared):
        return JobStep(cfg.sessions.clean_interval, "")
    summary = (
        f"{report.deleted} sessions removed, {report.spared} spared (touched meanwhile), "
        f"{report.remaining} left, in {report.seconds:.3f} s"
    )
    # The book sleeps 1 s once under the limit; with work left, go on at once.
    return JobStep(0.0 if report.more else cfg.sessions.clean_interval, summary)


JOBS: dict[str, Job] = {
    "counters": Job("counters", _clean_counters),
    "rows": Job("rows", _refresh_rows),
    "ranking": Job("ranking", _rescale_views),
    "sessions": Job("sessions", _clean_sessions),
}


def jobs_named(names: Sequence[str] | None) -> list[Job]:
    """The jobs of these names (all jobs when ``names`` is empty or None)."""
    if not names:
        return list(JOBS.values())
    unknown = [n for n in names if n not in JOBS]
    if unknown:
        raise ConfigError(f"unknown job(s) {', '.join(unknown)}; known: {', '.join(JOBS)}")
    return [JOBS[n] for n in names]
