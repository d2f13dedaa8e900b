"""Which requests the page cache may answer, and under which key.

The rules are the application's: :class:`PageRules` lists the routes it marks
cacheable (:class:`CacheRoute`, with the request headers each varies on) and
says whether item pages are cached the book's way (Redis in Action 2.3: a
page with an ``item`` query parameter, no ``_`` parameter, whose item ranks
in the top 10,000 most viewed). ``PageRules()`` is the book's rule alone.

A page's key is a digest of the method, scheme, host, path, the *normalized*
query string (parameters in name order, tracking parameters dropped) and the
values of the declared vary headers, nothing else: cookies other than those
declared, CSRF tokens and ``Vary: Cookie`` never split the cache, and no
request text ever reaches a Redis key (only its digest does). An item page's
key lies in its item's shard, so all pages of one item can be dropped at once.

Nothing here does I/O: :func:`PageRules.plan` is pure, and admission by rank
supplies the read that a miss sends in the same round trip as its claim.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from webtier._keys import PageShard, check_name, shard_of
from webtier._ops.ranking import decode_rank, rank_request
from webtier._protocol import Reply, Request
from webtier.config import Config, PageCacheSettings
from webtier.errors import ConfigError, InvalidInput


@dataclass(frozen=True, slots=True)
class PageRequest:
    """What the page cache looks at in a request; header names in lower case."""

    method: str
    path: str
    query: str = ""  # the raw query string, without '?'
    scheme: str = "http"
    host: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_url(cls, url: str, headers: Mapping[str, str] | None = None) -> PageRequest:
        """A GET of ``url`` (``http://host/path?query`` or just ``/path?query``)."""
        _check_text("url", url)
        if headers is not None and not isinstance(headers, Mapping):
            raise InvalidInput("headers", "must be a mapping of header names to values", headers)
        for name, value in (headers or {}).items():
            _check_text("headers", name)
            _check_text("headers", value)
        try:
            parts = urlsplit(url)
        except ValueError as error:
            raise InvalidInput("url", f"is not a URL: {error}", url) from None
        return cls(
            "GET",
            parts.path or "/",
            parts.query,
            parts.scheme or "http",
            parts.netloc,
            {k.lower(): v for k, v in (headers or {}).items()},
        )


def _check_text(field: str, value: object) -> bool:
    """True if ``value`` is text (a str that is valid Unicode), else InvalidInput."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a str, not {type(value).__name__}", value)
    try:
        value.encode()
    except UnicodeEncodeError:
        raise InvalidInput(field, "contains a lone surrogate", value) from None
    return True


# -- admission of item pages ---------------------------------------------------------------


class Admission(Protocol):
    """Decides whether an item page may be cached. ``requests`` are read on
    a miss, in the claim's own round trip; ``admits`` gets their replies."""

    def requests(self, cfg: Config, item: str) -> tuple[Request, ...]: ...

    def admits(self, cfg: Config, item: str, replies: Sequence[Reply]) -> bool: ...


@dataclass(frozen=True, slots=True)
class RankAdmission:
    """The book's rule: the item ranks in the top ``cfg.pagecache.top``
    most viewed (one ZREVRANK, read with the claim of a miss)."""

    def requests(self, cfg: Config, item: str) -> tuple[Request, ...]:
        return (rank_request(cfg, item),)

    def admits(self, cfg: Config, item: str, replies: Sequence[Reply]) -> bool:
        place = decode_rank(replies[0][0])
        return place is not None and place < cfg.pagecache.top


@dataclass(frozen=True, slots=True)
class SetAdmission:
    """Admission by a set the process keeps itself (for instance a top-N set
    refreshed every few seconds): nothing is read from Redis."""

    contains: Callable[[str], bool]

    def requests(self, cfg: Config, item: str) -> tuple[Request, ...]:
        return ()

    def admits(self, cfg: Config, item: str, replies: Sequence[Reply]) -> bool:
        return self.contains(item)


# -- rules --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CacheRoute:
    """A route the application marks cacheable.

    ``path`` is a path, or a pattern with ``*`` (``/products/*``). ``vary``
    names the request headers the page depends on (they join the key); any
    other header, cookies included, must not change the page. ``private=True``
    says the page is the same for signed-in users, so requests carrying a
    session cookie or ``Authorization`` may be answered from the cache too.
    ``ttl`` overrides the default freshness (seconds)."""

    path: str
    vary: tuple[str, ...] = ()
    ttl: float | None = None
    private: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path.startswith("/"):
            raise ConfigError(f"a cached route's path must start with '/' (got {self.path!r})")
        vary: object = self.vary
        if not isinstance(vary, tuple) or not all(isinstance(h, str) and h for h in vary):
            raise ConfigError(f"vary must be a tuple of header names (got {self.vary!r})")
        object.__setattr__(self, "vary", tuple(sorted({h.lower() for h in self.vary})))
        if self.ttl is not None and not (
            isinstance(self.ttl, int | float) and not isinstance(self.ttl, bool) and self.ttl > 0
        ):
            raise ConfigError(f"a route's ttl must be > 0 seconds (got {self.ttl!r})")

    def matches(self, path: str) -> bool:
        return fnmatch.fnmatchcase(path, self.path) if "*" in self.path else path == self.path


@dataclass(frozen=True, slots=True)
class Plan:
    """Where a cacheable request's page lives and how it may be cached."""

    digest: str  # hex digest of the key material: the page's name in Redis
    shard: PageShard
    item: str | None  # the item whose pages this one counts among
    ttl: float  # seconds a stored copy is fresh at most
    vary: tuple[str, ...]  # request headers the page may vary on
    admission: Admission | None  # None: admitted by the route itself


# Methods whose responses are cached. HEAD is left to the app: its response
# has no body to store.
CACHED_METHODS = frozenset({"GET"})


@dataclass(frozen=True, slots=True)
class PageRules:
    """The application's caching rules; the default is the book's."""

    routes: tuple[CacheRoute, ...] = ()
    item_pages: bool = True  # cache item pages the book's way
    admission: Admission = field(default_factory=RankAdmission)

    def plan(self, cfg: Config, request: PageRequest) -> Plan | None:
        """The plan for ``request``, or None if the cache must leave it alone."""
        settings = cfg.pagecache
        if request.method not in CACHED_METHODS:
            return None
        params = parse_qsl(request.query, keep_blank_values=True)
        names = [name for name, _ in params]
        if settings.dynamic_param in names:
            return None  # the book's mark of a dynamic page
        items = [value for name, value in params if name == settings.item_param]
        item = items[0] if len(items) == 1 else None
        if item is not None:
            try:
                check_name("item", item)
            except InvalidInput:
                item = None
        route = next((r for r in self.routes if r.matches(request.path)), None)
        if route is None and not (self.item_pages and item is not None):
            return None
        private = route is not None and route.private
        if not private and is_private(settings, request.headers):
            return None
        vary = route.vary if route is not None else ()
        digest = page_digest(settings, request, params, vary)
        shard_number = (
            shard_of(item, settings.shards)
            if item is not None
            else int(digest[:8], 16) % settings.shards
        )
        ttl = settings.ttl if route is None or route.ttl is None else min(route.ttl, settings.ttl)
        return Plan(
            digest,
            cfg.keys.page_shard(shard_number),
            item,
            ttl,
            vary,
            self.admission if route is None else None,
        )


def is_private(settings: PageCacheSettings, headers: Mapping[str, str]) -> bool:
    """Whether a request carries credentials: ``Authorization`` or a session cookie."""
    if "authorization" in headers:
        return True
    cookie = headers.get("cookie")
    if not cookie:
        return False
    for crumb in cookie.split(";"):
        name = crumb.split("=", 1)[0].strip()
        if name in settings.private_cookies:
            return True
    return False


def is_ignored(settings: PageCacheSettings, name: str) -> bool:
    ignored = settings.ignored_params
    if name in ignored:
        return True
    return any(p.endswith("*") and name.startswith(p[:-1]) for p in ignored)


def normalized_query(settings: PageCacheSettings, params: Sequence[tuple[str, str]]) -> str:
    """Parameters in name order (repeats keep their order), tracking ones dropped."""
    kept = sorted((p for p in params if not is_ignored(settings, p[0])), key=lambda p: p[0])
    return urlencode(kept, quote_via=quote)


def page_digest(
    settings: PageCacheSettings,
    request: PageRequest,
    params: Sequence[tuple[str, str]],
    vary: Sequence[str],
) -> str:
    # Each part is length-prefixed, so no two requests spell the same material.
    parts = [
        request.method,
        request.scheme.lower(),
        request.host.lower(),
        request.path,
        normalized_query(settings, params),
    ]
    parts += [f"{name}={request.headers.get(name, '')}" for name in vary]
    material = "".join(f"{len(p.encode())}:{p}" for p in parts)
    return hashlib.blake2b(material.encode(), digest_size=16).hexdigest()
