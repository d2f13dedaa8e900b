"""Settings of the data capabilities: counters, retries, rows, statistics, ranking."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webtier._core.deadline import check_limit
from webtier._core.keys import check_stat_type
from webtier.errors import ConfigError, InvalidInput

if TYPE_CHECKING:
    from webtier.rows.source import Source

from webtier.config.validate import is_int, is_seconds, require

# The book's precisions: 1 s, 5 s, 1 min, 5 min, 1 h, 5 h, 1 day.
BOOK_PRECISIONS = (1, 5, 60, 300, 3600, 18000, 86400)
BOOK_SAMPLES = 120


@dataclass(frozen=True, slots=True)
class Precision:
    """One resolution of a counter: slices of ``seconds``, the newest
    ``samples`` of them kept."""

    seconds: int
    samples: int = BOOK_SAMPLES

    def __post_init__(self) -> None:
        require(is_int(self.seconds) and self.seconds >= 1, "precision seconds must be an int >= 1")
        require(is_int(self.samples) and 1 <= self.samples <= 100_000, "samples must be 1..100000")

    @property
    def span(self) -> int:
        """Seconds of history this precision keeps."""
        return self.seconds * self.samples


@dataclass(frozen=True, slots=True)
class CounterSettings:
    precisions: tuple[Precision, ...] = tuple(Precision(p) for p in BOOK_PRECISIONS)
    # The known-counters index is split in this many shards, each with its own
    # hash tag, so no single cluster slot holds every counter. A counter's shard
    # follows from its name and this number: keep it fixed for a deployment.
    shards: int = 64
    clean_interval: float = 60.0  # seconds between two cleanup passes

    # Derived once here, because recording reads them on every call.
    seconds: tuple[int, ...] = field(init=False, repr=False, compare=False)
    script_settings: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        seconds = [p.seconds for p in self.precisions]
        require(len(seconds) > 0, "at least one precision is needed")
        require(len(set(seconds)) == len(seconds), f"precisions repeat: {seconds}")
        require(seconds == sorted(seconds), f"precisions must be ascending: {seconds}")
        require(is_int(self.shards) and 1 <= self.shards <= 16384, "shards must be 1..16384")
        require(self.clean_interval > 0, "clean_interval must be > 0")
        object.__setattr__(self, "seconds", tuple(seconds))
        # An index entry outlives the longest retention by a minute, so a name
        # is never unlisted while a key written at the same instant lives.
        horizon_ms = self.horizon * 1000 + 60_000
        triples = " ".join(f"{p.seconds}:{p.samples}:{p.span * 1000}" for p in self.precisions)
        object.__setattr__(self, "script_settings", f"{horizon_ms} {triples}")

    @classmethod
    def of(
        cls, precisions: tuple[int, ...] = BOOK_PRECISIONS, samples: int = BOOK_SAMPLES, **kw: float
    ) -> CounterSettings:
        """Settings with the same number of samples at every precision."""
        return cls(precisions=tuple(Precision(p, samples) for p in precisions), **kw)  # type: ignore[arg-type]

    def precision(self, seconds: int) -> Precision:
        for p in self.precisions:
            if p.seconds == seconds:
                return p
        known = ", ".join(str(p.seconds) for p in self.precisions)
        raise ConfigError(f"precision {seconds!r} is not configured (configured: {known})")

    @property
    def granule(self) -> int:
        """The longest slice that lies inside one slice of every precision."""
        return math.gcd(*(p.seconds for p in self.precisions))

    @property
    def horizon(self) -> int:
        """Seconds after its last new slice that a counter's data can live."""
        return max(p.span for p in self.precisions)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often a request is tried again when Redis is unreachable.

    Reads and idempotent writes are retried after timeouts too; a write that is
    not safe to repeat is retried only when it provably never left the client.
    """

    attempts: int = 3  # tries after the first one
    backoff: float = 0.05  # seconds before the first retry, doubled each time
    backoff_cap: float = 1.0  # seconds
    # Seconds an operation may wait for Redis, its tries included, unless a
    # webtier.time_limit() around the call says otherwise; None: bounded only
    # by the tries and the client's socket timeouts.
    time_limit: float | None = None

    def __post_init__(self) -> None:
        require(is_int(self.attempts) and 0 <= self.attempts <= 100, "attempts must be 0..100")
        require(0 <= self.backoff <= self.backoff_cap, "need 0 <= backoff <= backoff_cap")
        check_limit(self.time_limit, "time_limit")

    def pause_before(self, failures: int) -> float:
        """Seconds to wait before try number ``failures + 1`` (jittered doubling)."""
        ceiling = min(self.backoff_cap, self.backoff * 2 ** (failures - 1))
        return _JITTER.uniform(ceiling / 2, ceiling)


# A generator of webtier's own: a library must not move the application's
# global random state (tests that replay it, Hypothesis among them, notice).
_JITTER = random.Random()


# -- row cache --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowSettings:
    """The row cache (Redis in Action 2.4): database rows kept fresh in Redis."""

    # The sources the worker refreshes (`webtier worker`, the "rows" job).
    sources: tuple[Source, ...] = ()
    # Each source's schedule is split in this many shards, each its own
    # cluster slot, so workers do not queue on one slot. A row's shard follows
    # from its key and this number: keep it fixed for a deployment.
    shards: int = 16
    batch: int = 500  # rows claimed per shard per round, and per database query
    lease: float = 10.0  # seconds a worker holds claimed rows before others may retry them
    fill_lease: float = 5.0  # seconds a read-through load holds a row before another may
    ttl: float = 300.0  # seconds a read-through copy of a row that is not scheduled lives
    missing_ttl: float = 5.0  # seconds read-through remembers "no such row" (0: never)
    poll: float = 0.05  # seconds a worker waits when nothing is due (the book's 50 ms)
    retry_backoff: float = 1.0  # seconds before a failed row is retried, doubled per failure
    retry_cap: float = 60.0  # seconds, the longest of those waits

    def __post_init__(self) -> None:
        require(is_int(self.shards) and 1 <= self.shards <= 16384, "shards must be 1..16384")
        require(is_int(self.batch) and 1 <= self.batch <= 10_000, "batch must be 1..10000")
        year = 365 * 86400
        for name in ("lease", "fill_lease", "ttl", "poll", "retry_backoff", "retry_cap"):
            require(
                is_seconds(getattr(self, name), 0.001, year),
                f"{name} must be 0.001 to {year} seconds",
            )
        require(is_seconds(self.missing_ttl, 0, year), f"missing_ttl must be 0 to {year} seconds")
        require(self.retry_backoff <= self.retry_cap, "need retry_backoff <= retry_cap")
        names = [source.name for source in self.sources]
        require(len(set(names)) == len(names), f"row source names repeat: {names}")


# -- statistics and access time ----------------------------------------------------------

ACCESS_TIME = "AccessTime"  # the book's type for timed blocks


def sub_buckets_for(relative_error: float) -> int:
    """The fewest buckets per power of two keeping ``relative_error``: the
    layout of a histogram (:mod:`webtier.stats.histogram`) of that error."""
    if not 0.0005 <= relative_error <= 0.25:
        raise ConfigError(f"relative_error must be in [0.0005, 0.25] (got {relative_error!r})")
    return math.ceil((1 / relative_error - 1) / 2)


@dataclass(frozen=True, slots=True)
class StatsSettings:
    """Per-period aggregates of (context, type): the book's hourly stats."""

    period: int = 3600  # seconds of one record (the book's hour); must divide a day
    keep: int = 24  # complete periods kept besides the current one, each expiring by itself
    histograms: bool = True  # percentiles, from a histogram per (context, type, period)
    relative_error: float = 0.02  # most a percentile may be off, relative to the true value
    ranked: frozenset[str] = frozenset({ACCESS_TIME})  # types whose contexts can be ranked
    # Contexts listed for rankings, per shard and period: contexts beyond it
    # are recorded but not ranked. Bounds the listing whatever names arrive.
    rank_limit: int = 10_000
    non_negative: frozenset[str] = frozenset({ACCESS_TIME})  # types refusing values < 0
    # Contexts are spread over this many hash tags (so cluster slots); a
    # context's shard follows from its name and this number: keep it fixed.
    shards: int = 64

    # Derived once here.
    sub_buckets: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        require(
            is_int(self.period) and 1 <= self.period <= 86400 and 86400 % self.period == 0,
            "period must be an int of seconds dividing a day (86400)",
        )
        require(is_int(self.keep) and 0 <= self.keep <= 10_000, "keep must be 0..10000")
        require(isinstance(self.histograms, bool), "histograms must be True or False")
        require(
            is_int(self.rank_limit) and 1 <= self.rank_limit <= 1_000_000,
            "rank_limit must be 1..1000000",
        )
        require(is_int(self.shards) and 1 <= self.shards <= 16384, "shards must be 1..16384")
        for name in ("ranked", "non_negative"):
            types = getattr(self, name)
            require(isinstance(types, frozenset), f"{name} must be a frozenset of type names")
            for stat_type in types:
                try:
                    check_stat_type(stat_type)
                except InvalidInput as error:
                    raise ConfigError(f"{name}: {error}") from None
        object.__setattr__(self, "sub_buckets", sub_buckets_for(self.relative_error))


# -- item view ranking -------------------------------------------------------------------


# The ranking's shards on Redis Cluster when left to the client (shards=None):
# 12 spread evenly over 1, 2, 3, 4, 6 or 12 masters of the default slot ranges.
CLUSTER_RANKING_SHARDS = 12
MAX_RANKING_SHARDS = 256


@dataclass(frozen=True, slots=True)
class RankingSettings:
    """The item view ranking (Redis in Action 2.5) and its rescale."""

    keep: int = 20_000  # most viewed items each rescale keeps (the book's 20,000)
    factor: float = 0.5  # every view count is multiplied by it at each rescale (the book halves)
    # Seconds of one rescale period (the book's 5 minutes). Periods are counted
    # on the Redis server's clock, so workers whose clocks disagree still agree
    # on the period, and at most one rescale happens in each.
    interval: int = 300
    # Seconds the ranking lives once views stop (with the rescale halving
    # every 5 minutes, a day-old ranking holds nothing worth keeping).
    expire_after: int = 86_400
    # Shards the ranking is split over, by item (docs/ranking.md), so that on
    # Redis Cluster no one slot takes every view. 1 is the book's one zset.
    # None decides by the client when a tier is built: 1 on a single server
    # (where one key is faster), CLUSTER_RANKING_SHARDS on Cluster. Stored
    # with the deployment's settings, so every process agrees on it.
    shards: int | None = None

    def __post_init__(self) -> None:
        require(is_int(self.keep) and 1 <= self.keep <= 100_000_000, "keep must be 1..100000000")
        require(
            self.shards is None or (is_int(self.shards) and 1 <= self.shards <= MAX_RANKING_SHARDS),
            f"shards must be an int, 1..{MAX_RANKING_SHARDS}, or None (1 on one server, "
            f"{CLUSTER_RANKING_SHARDS} on Cluster)",
        )
        require(
            isinstance(self.factor, int | float)
            and not isinstance(self.factor, bool)
            and 0 < self.factor <= 1,
            "factor must be a number in (0, 1]",
        )
        require(
            is_int(self.interval) and 1 <= self.interval <= 7 * 86400,
            "interval must be an int of seconds, 1..604800",
        )
        require(
            is_int(self.expire_after) and 60 <= self.expire_after <= 90 * 86400,
            "expire_after must be an int of seconds, 60..7776000",
        )
