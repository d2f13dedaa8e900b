"""Every value webtier's public calls return: results, reports and records.

Frozen dataclasses, free of I/O; the operations that build them live in
each capability's package (``webtier.counters.ops``...).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    # Only for the annotations: the statistics' package sits above this module.
    from webtier.stats.histogram import Histogram

CacheStatus = Literal["HIT", "MISS", "STALE"]  # how the page cache answered


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str  # the session's public id: stable across login rotation, not the token
    user: str | None  # None while anonymous
    created: float  # seconds since the epoch (server clock)
    last_seen: float  # seconds since the epoch (server clock); never moves backwards


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A framework's session as stored: its data (JSON values by key) and,
    for an interface that stores bytes, its blob."""

    data: dict[str, Any]  # JSON values by key
    blob: bytes | None
    # Each key's JSON as stored: what a framework keeps of the session it
    # read, to send only the keys that differ (no encoding of what it read).
    json: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class CartChange:
    """One line of the user's cart that a login merge changed."""

    item: str
    before: int  # the user's count before the merge (0: not in the cart)
    after: int  # the count now (0: dropped)


@dataclass(frozen=True, slots=True)
class LoginResult:
    token: str  # the new token; the old one is dead
    cart_changes: tuple[CartChange, ...]  # how the user's cart changed, by item


@dataclass(frozen=True, slots=True)
class SessionCleanReport:
    """What one cleaner pass did."""

    deleted: int  # sessions removed (over the limit, idle or past the backstop)
    # chosen, but touched (or removed by another cleaner) before the removal;
    # when chosen by a threshold, of those surely there when picked
    spared: int
    remaining: int  # sessions in the recency indexes when the pass ended
    steps: int
    seconds: float
    more: bool  # stopped at max_steps with work left


@dataclass(frozen=True, slots=True)
class SessionStats:
    """The session store at a glance, from the recency indexes."""

    sessions: int  # listed in the recency indexes (expired ones until cleaned)
    busiest_shard: int  # sessions in the fullest shard (spread check)
    oldest: float | None  # least recent last-seen, seconds since the epoch
    newest: float | None  # most recent last-seen


@dataclass(frozen=True, slots=True)
class CounterCleanReport:
    """What one cleanup pass did."""

    counters: int  # counters visited (a counter seen twice by ZSCAN counts twice)
    samples_dropped: int
    counters_unlisted: int
    seconds: float


@dataclass(frozen=True, slots=True)
class Recorded:
    """The period's record right after a value was added to it."""

    start: int  # of the period, server time, seconds since the epoch
    count: int
    sum: float
    m2: float  # sum of squared deviations from the mean

    @property
    def sumsq(self) -> float:
        """Sum of the squares of the values (the book's ``sumsq``)."""
        return self.m2 + self.sum * self.sum / self.count


@dataclass(frozen=True, slots=True)
class Summary:
    """Aggregates of one (context, type) over one or more periods.

    ``mean`` and ``stddev`` follow the book (sample standard deviation,
    dividing by ``count - 1 or 1``) but are computed from ``m2``, which stays
    exact for large counts. Percentiles come from the histogram, within its
    relative error (2% by default)."""

    context: str
    type: str
    start: int  # start of the oldest period read, server time
    periods: int  # how many periods were merged
    count: int = 0
    sum: float = 0.0
    m2: float = 0.0
    min: float | None = None
    max: float | None = None
    errors: int = 0  # samples recorded with failed=True (blocks that raised)
    histogram: Histogram | None = None

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count else None

    @property
    def sumsq(self) -> float:
        return self.m2 + self.sum * self.sum / self.count if self.count else 0.0

    @property
    def stddev(self) -> float | None:
        return math.sqrt(self.m2 / (self.count - 1 or 1)) if self.count else None

    def percentile(self, percent: float) -> float | None:
        """The ``percent`` percentile (0-100, nearest rank); ``None`` when
        there are no samples or no histogram."""
        if self.histogram is None:
            return None
        return self.histogram.percentile(percent, self.min, self.max)

    def merge(self, other: Summary) -> Summary:
        """Both summaries' samples as one (Chan et al.'s pairwise update)."""
        if not other.count:
            return self._widen(other)
        if not self.count:
            return other._widen(self)
        count = self.count + other.count
        delta = other.sum / other.count - self.sum / self.count
        m2 = self.m2 + other.m2 + delta * delta * self.count * other.count / count
        histogram = self.histogram
        if histogram is not None and other.histogram is not None:
            histogram = histogram.merge(other.histogram)
        elif other.histogram is not None:
            histogram = other.histogram
        return Summary(
            self.context,
            self.type,
            min(self.start, other.start),
            self.periods + other.periods,
            count,
            self.sum + other.sum,
            m2,
            min(v for v in (self.min, other.min) if v is not None),
            max(v for v in (self.max, other.max) if v is not None),
            self.errors + other.errors,
            histogram,
        )

    def _widen(self, empty: Summary) -> Summary:
        return Summary(
            self.context,
            self.type,
            min(self.start, empty.start),
            self.periods + empty.periods,
            self.count,
            self.sum,
            self.m2,
            self.min,
            self.max,
            self.errors,
            self.histogram,
        )


@dataclass(frozen=True, slots=True)
class RescaleReport:
    """What one call of :func:`rescale` found or did."""

    done: bool  # True: this call rescaled (a shard at least); False: the period was already
    period: int  # start of the server's current period, seconds since the epoch
    removed: int  # items trimmed off the shards this call rescaled
    left: int  # items left in those shards (0 when not done)
    next_in: float  # seconds until the next period begins, by the server's clock
    shards: int = 1  # shards this call rescaled (others were by another rescaler)


@dataclass(frozen=True, slots=True)
class RowStatus:
    """How many rows of a source are scheduled, due, and being loaded."""

    scheduled: int
    due: int  # due now and not claimed yet
    loading: int  # loads in flight (claimed by a worker, or read through)
    # Seconds the most overdue row has waited past its due time (0: none due):
    # how far the refreshing workers lag behind the schedule.
    overdue: float = 0.0


@dataclass(frozen=True, slots=True)
class RefreshReport:
    """What a refresh did."""

    claimed: int = 0  # rows taken from the schedule
    stored: int = 0  # fresh copies stored
    removed: int = 0  # rows gone from the database, so removed from the cache
    fenced: int = 0  # loads not stored: the row changed or was loaded again meanwhile
    dropped: int = 0  # rows scheduled without a delay, unscheduled (the book's crash)
    failed: int = 0  # rows whose load failed, to be retried with backoff
    seconds: float = 0.0

    def __add__(self, other: RefreshReport) -> RefreshReport:
        return RefreshReport(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(self))
        )


@dataclass(frozen=True, slots=True)
class FlushReport:
    """What one flush of a recorder did with its entries: (counter, granule)
    sums, or statistics' (context, type) batches."""

    sent: int  # entries applied
    kept: int  # entries that did not reach Redis, kept for the next flush
    lost: int  # entries whose outcome is unknown, or that Redis refused


@dataclass(frozen=True, slots=True)
class JobStep:
    """What one run of a job did."""

    delay: float  # seconds until the job wants to run again
    summary: str  # one line for the log


@dataclass(frozen=True, slots=True)
class Rendered:
    """A response the application produced.

    ``ttl`` is how long it may be cached (seconds), None when it may not be:
    the caller's policy decides, from its status and headers. ``sent`` is
    True when it was streamed straight to the client (nothing to send).
    ``personal``: not stored, rendered for a visitor with a session on a
    route with holes (it may be theirs alone: it read their session, set
    their cookie); the page may still be stored by another visitor's
    render, so it leaves no pass note."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    ttl: float | None
    sent: bool = False
    # Where its holes are in ``body`` (offset, name), the markers taken out:
    # the parts each answer fills for its visitor (webtier.pagecache.holes).
    holes: tuple[tuple[int, str], ...] = ()
    personal: bool = False


@dataclass(frozen=True, slots=True)
class Page:
    """A cached copy of a response."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes  # gzip-compressed when ``gzipped``
    gzipped: bool
    etag: str
    stored: float  # epoch seconds
    fresh_until: float  # epoch seconds
    holes: tuple[tuple[int, str], ...] = ()  # (offset in the plain body, name): filled per visitor

    def plain_body(self) -> bytes:
        return zlib.decompress(self.body, 31) if self.gzipped else self.body

    def fresh(self, now: float) -> bool:
        return now < self.fresh_until


@dataclass(frozen=True, slots=True)
class Served:
    """What :func:`serve` did: the page to answer with (a cached copy, or the
    render just stored), or the render that could not be stored."""

    outcome: CacheStatus
    page: Page | None = None
    rendered: Rendered | None = None


@dataclass(frozen=True, slots=True)
class DeploymentSettings:
    """The settings that decide where a deployment's data lives, as stored in
    Redis by its first writer (see :mod:`webtier.deployment.layout`)."""

    version: int  # of the key layout they describe
    values: dict[str, int | float | str]  # by name: "sessions.shards" -> 64
