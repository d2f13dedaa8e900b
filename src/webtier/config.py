"""Settings, as frozen values checked when they are built.

Nothing here reads the environment: the CLI and the web adapters do that at the
edge and pass plain values in. Durations are in seconds unless a name says
otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webtier._keys import Keyspace, check_stat_type
from webtier.errors import ConfigError, InvalidInput
from webtier.histogram import sub_buckets_for

if TYPE_CHECKING:
    from webtier.rowsource import Source


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seconds(value: object, low: float, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


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
        _require(
            _is_int(self.seconds) and self.seconds >= 1, "precision seconds must be an int >= 1"
        )
        _require(
            _is_int(self.samples) and 1 <= self.samples <= 100_000, "samples must be 1..100000"
        )

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
        _require(len(seconds) > 0, "at least one precision is needed")
        _require(len(set(seconds)) == len(seconds), f"precisions repeat: {seconds}")
        _require(seconds == sorted(seconds), f"precisions must be ascending: {seconds}")
        _require(_is_int(self.shards) and 1 <= self.shards <= 16384, "shards must be 1..16384")
        _require(self.clean_interval > 0, "clean_interval must be > 0")
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

    def __post_init__(self) -> None:
        _require(_is_int(self.attempts) and 0 <= self.attempts <= 100, "attempts must be 0..100")
        _require(0 <= self.backoff <= self.backoff_cap, "need 0 <= backoff <= backoff_cap")


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
        _require(_is_int(self.shards) and 1 <= self.shards <= 16384, "shards must be 1..16384")
        _require(_is_int(self.batch) and 1 <= self.batch <= 10_000, "batch must be 1..10000")
        year = 365 * 86400
        for name in ("lease", "fill_lease", "ttl", "poll", "retry_backoff", "retry_cap"):
            _require(
                _is_seconds(getattr(self, name), 0.001, year),
                f"{name} must be 0.001 to {year} seconds",
            )
        _require(_is_seconds(self.missing_ttl, 0, year), f"missing_ttl must be 0 to {year} seconds")
        _require(self.retry_backoff <= self.retry_cap, "need retry_backoff <= retry_cap")
        names = [source.name for source in self.sources]
        _require(len(set(names)) == len(names), f"row source names repeat: {names}")


# -- statistics and access time ----------------------------------------------------------

ACCESS_TIME = "AccessTime"  # the book's type for timed blocks


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
        _require(
            _is_int(self.period) and 1 <= self.period <= 86400 and 86400 % self.period == 0,
            "period must be an int of seconds dividing a day (86400)",
        )
        _require(_is_int(self.keep) and 0 <= self.keep <= 10_000, "keep must be 0..10000")
        _require(isinstance(self.histograms, bool), "histograms must be True or False")
        _require(
            _is_int(self.rank_limit) and 1 <= self.rank_limit <= 1_000_000,
            "rank_limit must be 1..1000000",
        )
        _require(_is_int(self.shards) and 1 <= self.shards <= 16384, "shards must be 1..16384")
        for name in ("ranked", "non_negative"):
            types = getattr(self, name)
            _require(isinstance(types, frozenset), f"{name} must be a frozenset of type names")
            for stat_type in types:
                try:
                    check_stat_type(stat_type)
                except InvalidInput as error:
                    raise ConfigError(f"{name}: {error}") from None
        object.__setattr__(self, "sub_buckets", sub_buckets_for(self.relative_error))


@dataclass(frozen=True, slots=True)
class Config:
    """Everything a :class:`~webtier.sync.WebTier` needs besides its client."""

    prefix: str = "webtier"  # every key webtier writes starts with it
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    counters: CounterSettings = field(default_factory=CounterSettings)
    rows: RowSettings = field(default_factory=RowSettings)
    stats: StatsSettings = field(default_factory=StatsSettings)
    keys: Keyspace = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", Keyspace(self.prefix))
