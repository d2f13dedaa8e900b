"""What the dashboard and the metrics exposition read, as operations.

Each reader composes the capabilities' own reads, so its cost is a fixed
number of steps (each one round trip per node) whatever the number of
counters, contexts, sessions or workers: the page of counters is cut from
one read of the index, and their samples come in one more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from webtier import counters, ranking, rows, sessions, stats
from webtier._core.checks import check_limit
from webtier._core.protocol import Op
from webtier.config import ACCESS_TIME, Config
from webtier.errors import InvalidInput
from webtier.types import RowStatus, SessionStats, Summary
from webtier.workers import liveness
from webtier.workers.liveness import WorkerInfo

# The counters the page cache and the session cleaner keep about themselves.
PAGECACHE_COUNTERS = {
    "hit": "pagecache:hit",
    "miss": "pagecache:miss",
    "stale": "pagecache:stale",
    "render": "pagecache:render",
}
SESSIONS_CLEANED = "sessions:cleaned"


@dataclass(frozen=True, slots=True)
class CounterPage:
    """One page of the counters' names, with their samples at one precision."""

    precision: int
    total: int  # names listed in the index (matching the prefix)
    offset: int
    series: dict[str, list[tuple[int, int]]]  # name -> (slice start, count), oldest first
    unknown: list[str]  # names asked for that the index does not list


@dataclass(frozen=True, slots=True)
class Health:
    """The tier's state at a glance: sessions, rows, workers, views."""

    sessions: SessionStats
    session_limit: int
    rows: dict[str, RowStatus]  # by source name
    workers: list[WorkerInfo]
    top_items: list[tuple[str, float]]


def check_precision(cfg: Config, precision: object) -> int:
    if precision not in cfg.counters.seconds:
        known = ", ".join(str(s) for s in cfg.counters.seconds)
        raise InvalidInput("precision", f"is not configured (configured: {known})", precision)
    return precision


def read_counter_page(
    cfg: Config,
    precision: int,
    *,
    prefix: str | None = None,
    offset: int = 0,
    limit: int = 50,
    names: Sequence[str] | None = None,
) -> Op[CounterPage]:
    """``limit`` counters from ``offset`` in name order (or exactly those of
    ``names`` that exist), with their samples at ``precision``: two steps."""
    check_precision(cfg, precision)
    check_limit("offset", offset, 0)
    check_limit("limit", limit, 1, 10_000)
    listed = yield from counters.ops.names(cfg, prefix)
    if names is None:
        total, chosen, unknown = len(listed), listed[offset : offset + limit], []
    else:
        known = set(listed)
        chosen = [n for n in names if n in known][:limit]
        unknown = [n for n in names if n not in known]
        total = len(chosen)
    series = yield from counters.ops.get_many(cfg, chosen, precision)
    return CounterPage(precision, total, offset, series, unknown)


def read_stats(
    cfg: Config, periods: int, *, type: str = ACCESS_TIME, limit: int = 100, by: str = "mean"
) -> Op[list[Summary]]:
    """The ``limit`` contexts of a ranked type with the highest ``by``, each
    merged over the newest ``periods`` periods, highest first."""
    ranked = yield from stats.ops.slowest(cfg, limit, type, periods, by)
    if not ranked:
        return []
    merged = yield from stats.ops.get_many(cfg, [context for context, _ in ranked], type, periods)
    return [merged[context] for context, _ in ranked]


def read_health(cfg: Config, *, top: int = 10) -> Op[Health]:
    """Sessions, the row sources' lag, live workers and the most viewed items."""
    session_stats = yield from sessions.ops.stats(cfg)
    statuses = {}
    for source in cfg.rows.sources:
        statuses[source.name] = yield from rows.ops.status(cfg, source)
    workers = yield from liveness.alive(cfg)
    top_items = yield from ranking.ops.top(cfg, top)
    return Health(session_stats, cfg.sessions.limit, statuses, workers, top_items)
