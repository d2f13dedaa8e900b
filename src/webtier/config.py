"""Settings, as frozen values checked when they are built.

Nothing here reads the environment: the CLI and the web adapters do that at the
edge and pass plain values in. Durations are in seconds unless a name says
otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webtier._core.deadline import check_limit
from webtier._core.keys import Keyspace, check_stat_type
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
    # Seconds an operation may wait for Redis, its tries included, unless a
    # webtier.time_limit() around the call says otherwise; None: bounded only
    # by the tries and the client's socket timeouts.
    time_limit: float | None = None

    def __post_init__(self) -> None:
        _require(_is_int(self.attempts) and 0 <= self.attempts <= 100, "attempts must be 0..100")
        _require(0 <= self.backoff <= self.backoff_cap, "need 0 <= backoff <= backoff_cap")
        check_limit(self.time_limit, "time_limit")


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


# -- item view ranking -------------------------------------------------------------------


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

    def __post_init__(self) -> None:
        _require(_is_int(self.keep) and 1 <= self.keep <= 100_000_000, "keep must be 1..100000000")
        _require(
            isinstance(self.factor, int | float)
            and not isinstance(self.factor, bool)
            and 0 < self.factor <= 1,
            "factor must be a number in (0, 1]",
        )
        _require(
            _is_int(self.interval) and 1 <= self.interval <= 7 * 86400,
            "interval must be an int of seconds, 1..604800",
        )
        _require(
            _is_int(self.expire_after) and 60 <= self.expire_after <= 90 * 86400,
            "expire_after must be an int of seconds, 60..7776000",
        )


# -- page cache ---------------------------------------------------------------------------

# Query parameters that only trace where a visitor came from: the page is the
# same without them, so they are dropped from cache keys. A name ending in
# '*' drops every parameter starting with the rest.
TRACKING_PARAMS = frozenset(
    {
        "utm_*",
        "fbclid",
        "gclid",
        "dclid",
        "gbraid",
        "wbraid",
        "msclkid",
        "mc_cid",
        "mc_eid",
        "yclid",
        "_ga",
        "_gl",
        "igshid",
        "twclid",
        "ttclid",
        "li_fat_id",
        "ref_src",
    }
)
# Cookies that identify a user: a request carrying one is private.
SESSION_COOKIES = frozenset({"webtier_session", "sessionid", "session"})

# Request headers browsers send with ordinary page loads, trusted not to
# change a page unless its route keys them (``vary``). Treating them as
# inputs would leave nothing storable: every browser sends them. HTTP gives
# a page that depends on one a way to say so, ``Vary``, and a response that
# varies on a header its route does not key is never stored. Any other
# header (``X-Forwarded-Host``, ``X-Original-URL``, an API key...) counts as
# an input: a request carrying it is answered from the cache but its render
# is not stored. A name ending in '*' matches every name starting with the rest.
BROWSER_HEADERS = frozenset(
    {
        "user-agent",
        "accept",
        "accept-language",
        "referer",
        "sec-fetch-*",
        "sec-ch-ua",
        "sec-ch-ua-mobile",
        "sec-ch-ua-platform",
        "upgrade-insecure-requests",
        "dnt",
        "sec-gpc",
        "priority",
    }
)
# Headers a reverse proxy sets to tell the app the client's host, scheme,
# port and path prefix: behind a proxy that sets them itself (overwriting
# what clients send), list them in ``proxy_headers`` so they join every key.
PROXY_HEADERS = (
    "forwarded",
    "x-forwarded-host",
    "x-forwarded-port",
    "x-forwarded-prefix",
    "x-forwarded-proto",
)
# Cookies that analytics scripts set and read in the browser: the server's
# page does not depend on them, so they do not keep a render from being
# stored. Any other cookie does, unless its route keys or ignores it.
ANALYTICS_COOKIES = frozenset(
    {
        "_ga",
        "_ga_*",
        "_gid",
        "_gat",
        "_gat_*",
        "__utm*",
        "_gcl_*",
        "_fbp",
        "_fbc",
        "_hj*",
        "_clck",
        "_clsk",
        "_uetsid",
        "_uetvid",
        "_pk_*",
        "ajs_*",
        "mp_*",
    }
)


def valid_header_names(value: object) -> bool:
    """Whether ``value`` is a tuple or frozenset of HTTP header names."""
    return isinstance(value, frozenset | tuple) and all(
        isinstance(n, str) and n and n.isascii() and not any(c in n for c in " :\t") for n in value
    )


@dataclass(frozen=True, slots=True)
class PageCacheSettings:
    """The page cache (Redis in Action 2.3): whole responses kept in Redis."""

    ttl: float = 300.0  # seconds a page is fresh (the book's 5 minutes); a smaller max-age wins
    top: int = 10_000  # item pages are cached when the item ranks in the top this many
    jitter: float = 0.1  # each TTL is shortened by up to this fraction, at random
    grace: float = 60.0  # seconds a stale page is still served while one worker renders it anew
    lock_lease: float = 10.0  # seconds a render holds its lock; a dead holder frees it then
    lock_wait: float = 5.0  # seconds a request waits for another's render before rendering itself
    compress_min: int = 1024  # bytes: smaller bodies are stored as they are
    max_body: int = 4 * 1024 * 1024  # bytes: larger responses are not stored
    pass_ttl: float = 30.0  # seconds a page found not storable is rendered without waiting
    max_pages_per_item: int = 1000  # pages of one item that can be cached (query variants)
    # Pages are spread over this many hash tags (cluster slots): an item's pages
    # by its id, others by their key. Keep it fixed for a deployment.
    shards: int = 64
    private_cookies: frozenset[str] = SESSION_COOKIES
    ignored_params: frozenset[str] = TRACKING_PARAMS
    item_param: str = "item"  # the query parameter naming an item page's item
    dynamic_param: str = "_"  # a query parameter marking a page dynamic (never cached)
    # Request headers and cookies trusted not to change a page (a route can
    # say otherwise). A request carrying a header or cookie its route neither
    # keys nor ignores, or a dropped query parameter, is answered from the
    # cache, but its render is never stored.
    ignored_headers: frozenset[str] = BROWSER_HEADERS
    ignored_cookies: frozenset[str] = ANALYTICS_COOKIES
    # Headers a trusted proxy in front sets itself (PROXY_HEADERS, say):
    # they join every page's key, so requests carrying them can be stored.
    proxy_headers: tuple[str, ...] = ()
    # A request with Cache-Control: no-cache (or Pragma: no-cache) gets a
    # render of its own, neither read from the cache nor stored.
    honor_no_cache: bool = True
    counters: bool = True  # count hits, misses and stale answers in the counters
    error_interval: float = 60.0  # seconds between two log lines about Redis being unavailable
    # Seconds each page-cache operation of a request (lookup, answer) may wait
    # for Redis, its tries included (a render's own time does not count); a
    # hung server then costs a request that, and the page is served uncached.
    time_limit: float | None = 1.0

    def __post_init__(self) -> None:
        check_limit(self.time_limit, "time_limit")
        year = 365 * 86400
        for name in ("ttl", "lock_lease", "pass_ttl", "error_interval"):
            _require(
                _is_seconds(getattr(self, name), 0.001, year),
                f"{name} must be 0.001 to {year} seconds",
            )
        for name in ("grace", "lock_wait"):
            _require(_is_seconds(getattr(self, name), 0, year), f"{name} must be 0 to {year} s")
        _require(_is_seconds(self.jitter, 0, 0.5), "jitter must be 0 to 0.5 (a fraction of ttl)")
        _require(_is_int(self.top) and self.top >= 0, "top must be an int >= 0")
        for name in ("compress_min", "max_body", "max_pages_per_item"):
            _require(
                _is_int(getattr(self, name)) and getattr(self, name) >= 1, f"{name} must be >= 1"
            )
        _require(_is_int(self.shards) and 1 <= self.shards <= 16384, "shards must be 1..16384")
        for name in ("counters", "honor_no_cache"):
            _require(isinstance(getattr(self, name), bool), f"{name} must be True or False")
        for name in ("private_cookies", "ignored_params"):
            names = getattr(self, name)
            _require(
                isinstance(names, frozenset) and all(isinstance(n, str) and n for n in names),
                f"{name} must be a frozenset of non-empty names",
            )
        for name in ("item_param", "dynamic_param"):
            _require(
                isinstance(getattr(self, name), str) and getattr(self, name),
                f"{name} must be a name",
            )
        _require(self.item_param != self.dynamic_param, "item_param and dynamic_param must differ")
        _require(
            isinstance(self.ignored_headers, frozenset)
            and valid_header_names(self.ignored_headers),
            "ignored_headers must be a frozenset of header names",
        )
        _require(
            isinstance(self.ignored_cookies, frozenset)
            and all(isinstance(n, str) and n for n in self.ignored_cookies),
            "ignored_cookies must be a frozenset of non-empty names",
        )
        _require(
            isinstance(self.proxy_headers, tuple)
            and valid_header_names(self.proxy_headers)
            and "*" not in "".join(self.proxy_headers),
            "proxy_headers must be a tuple of header names",
        )
        lower = frozenset(n.lower() for n in self.ignored_headers)
        object.__setattr__(self, "ignored_headers", lower)
        keyed = tuple(sorted({n.lower() for n in self.proxy_headers}))
        object.__setattr__(self, "proxy_headers", keyed)


# -- sessions and carts -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """Login sessions, recently viewed items and carts (Redis in Action 2.1-2.2)."""

    # Keep only the newest `limit` sessions (the book's LIMIT); the cleaner
    # ("sessions" worker job) removes the least recently seen beyond it.
    limit: int = 10_000_000
    # Sessions are spread over this many hash tags (cluster slots) by their
    # token; each shard keeps its own recency index. Keep it fixed for a deployment.
    shards: int = 64
    viewed: int = 25  # recently viewed items kept per session (the book's 25)
    idle_timeout: float = 0.0  # seconds without a touch before Redis drops a session (0: off)
    absolute_timeout: float = 0.0  # seconds after creation a session ends (0: off)
    # Every session key expires this long after its last touch even with the
    # timeouts off, so a dead cleaner cannot let memory grow without bound.
    backstop: float = 30 * 86400.0
    # Only tokens webtier issued (tier.sessions.new) are accepted; off, any
    # URL-safe token of 16-128 characters is (the book's uuid4 tokens).
    strict: bool = True
    # Sessions the cleaner removes per step, over all shards: about 80 a shard
    # and script by default, a fraction of a millisecond of the server's time.
    clean_batch: int = 5000
    clean_interval: float = 1.0  # seconds between cleaner passes (the book's 1 s)
    max_value_bytes: int = 4096  # one session data value, as JSON
    max_data_bytes: int = 16384  # all data values of a session, as JSON
    max_fields: int = 64  # data fields per session
    cart_lines: int = 50  # distinct items per cart
    cart_count: int = 1000  # most of one item in a cart
    # (idle, absolute, backstop) in whole milliseconds, rounded up, as Redis
    # takes them: worked out once here rather than on every touch.
    millis: tuple[int, int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _require(_is_int(self.limit) and 0 <= self.limit <= 2**40, "limit must be 0..2**40")
        _require(_is_int(self.shards) and 1 <= self.shards <= 4096, "shards must be 1..4096")
        _require(_is_int(self.viewed) and 0 <= self.viewed <= 1000, "viewed must be 0..1000")
        year = 365 * 86400
        for name in ("idle_timeout", "absolute_timeout"):
            _require(
                _is_seconds(getattr(self, name), 0, 10 * year),
                f"{name} must be 0 (off) to {10 * year} seconds",
            )
        _require(_is_seconds(self.backstop, 1, 10 * year), f"backstop must be 1 to {10 * year} s")
        _require(isinstance(self.strict, bool), "strict must be True or False")
        _require(
            _is_int(self.clean_batch) and 1 <= self.clean_batch <= 100_000,
            "clean_batch must be 1..100000",
        )
        _require(_is_seconds(self.clean_interval, 0.001, year), "clean_interval must be > 0")
        for name in ("max_value_bytes", "max_data_bytes", "max_fields", "cart_lines"):
            _require(_is_int(getattr(self, name)) and getattr(self, name) >= 1, f"{name} >= 1")
        _require(
            self.max_value_bytes <= self.max_data_bytes, "need max_value_bytes <= max_data_bytes"
        )
        _require(_is_int(self.cart_count) and 1 <= self.cart_count <= 2**31, "cart_count: 1..2**31")
        millis = tuple(
            math.ceil(seconds * 1000)
            for seconds in (self.idle_timeout, self.absolute_timeout, self.backstop)
        )
        object.__setattr__(self, "millis", millis)


@dataclass(frozen=True, slots=True)
class Config:
    """Everything a :class:`~webtier.sync.WebTier` needs besides its client."""

    prefix: str = "webtier"  # every key webtier writes starts with it
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    counters: CounterSettings = field(default_factory=CounterSettings)
    rows: RowSettings = field(default_factory=RowSettings)
    stats: StatsSettings = field(default_factory=StatsSettings)
    ranking: RankingSettings = field(default_factory=RankingSettings)
    pagecache: PageCacheSettings = field(default_factory=PageCacheSettings)
    # -- sessions and carts ---
    sessions: SessionSettings = field(default_factory=SessionSettings)
    keys: Keyspace = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", Keyspace(self.prefix))
