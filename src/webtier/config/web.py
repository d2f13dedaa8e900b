"""Settings of the web capabilities: the page cache and sessions."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webtier._core.deadline import check_limit

if TYPE_CHECKING:
    pass

from webtier.config.validate import is_int, is_seconds, require

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
            require(
                is_seconds(getattr(self, name), 0.001, year),
                f"{name} must be 0.001 to {year} seconds",
            )
        for name in ("grace", "lock_wait"):
            require(is_seconds(getattr(self, name), 0, year), f"{name} must be 0 to {year} s")
        require(is_seconds(self.jitter, 0, 0.5), "jitter must be 0 to 0.5 (a fraction of ttl)")
        require(is_int(self.top) and self.top >= 0, "top must be an int >= 0")
        for name in ("compress_min", "max_body", "max_pages_per_item"):
            require(
                is_int(getattr(self, name)) and getattr(self, name) >= 1, f"{name} must be >= 1"
            )
        require(is_int(self.shards) and 1 <= self.shards <= 16384, "shards must be 1..16384")
        for name in ("counters", "honor_no_cache"):
            require(isinstance(getattr(self, name), bool), f"{name} must be True or False")
        for name in ("private_cookies", "ignored_params"):
            names = getattr(self, name)
            require(
                isinstance(names, frozenset) and all(isinstance(n, str) and n for n in names),
                f"{name} must be a frozenset of non-empty names",
            )
        for name in ("item_param", "dynamic_param"):
            require(
                isinstance(getattr(self, name), str) and getattr(self, name),
                f"{name} must be a name",
            )
        require(self.item_param != self.dynamic_param, "item_param and dynamic_param must differ")
        require(
            isinstance(self.ignored_headers, frozenset)
            and valid_header_names(self.ignored_headers),
            "ignored_headers must be a frozenset of header names",
        )
        require(
            isinstance(self.ignored_cookies, frozenset)
            and all(isinstance(n, str) and n for n in self.ignored_cookies),
            "ignored_cookies must be a frozenset of non-empty names",
        )
        require(
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
        require(is_int(self.limit) and 0 <= self.limit <= 2**40, "limit must be 0..2**40")
        require(is_int(self.shards) and 1 <= self.shards <= 4096, "shards must be 1..4096")
        require(is_int(self.viewed) and 0 <= self.viewed <= 1000, "viewed must be 0..1000")
        year = 365 * 86400
        for name in ("idle_timeout", "absolute_timeout"):
            require(
                is_seconds(getattr(self, name), 0, 10 * year),
                f"{name} must be 0 (off) to {10 * year} seconds",
            )
        require(is_seconds(self.backstop, 1, 10 * year), f"backstop must be 1 to {10 * year} s")
        require(isinstance(self.strict, bool), "strict must be True or False")
        require(
            is_int(self.clean_batch) and 1 <= self.clean_batch <= 100_000,
            "clean_batch must be 1..100000",
        )
        require(is_seconds(self.clean_interval, 0.001, year), "clean_interval must be > 0")
        for name in ("max_value_bytes", "max_data_bytes", "max_fields", "cart_lines"):
            require(is_int(getattr(self, name)) and getattr(self, name) >= 1, f"{name} >= 1")
        require(
            self.max_value_bytes <= self.max_data_bytes, "need max_value_bytes <= max_data_bytes"
        )
        require(is_int(self.cart_count) and 1 <= self.cart_count <= 2**31, "cart_count: 1..2**31")
        millis = tuple(
            math.ceil(seconds * 1000)
            for seconds in (self.idle_timeout, self.absolute_timeout, self.backstop)
        )
        object.__setattr__(self, "millis", millis)
