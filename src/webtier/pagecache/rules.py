"""Which requests the page cache may answer, and under which key.

The rules are the application's: :class:`PageRules` lists the routes it marks
cacheable (:class:`CacheRoute`, with the request headers and cookies each
varies on), and which of them are item routes, cached the book's way (Redis
in Action 2.3: a page with an ``item`` query parameter, no ``_`` parameter,
whose item ranks in the top 10,000 most viewed). :data:`BOOK_RULES` is the
book's rule on every path, for the book's functions (a URL, no headers).

A page's key is a digest of what the request says (:mod:`webtier.pagecache.request`);
an item page's key lies in its item's shard, so all pages of one item can be
dropped at once.

A render is stored only if every input of its request that could reach the
page is in the key (:attr:`Plan.unkeyed` lists those that are not): a
dropped query parameter, a query string spelled with characters browsers
escape, a header the route neither keys nor trusts (``X-Forwarded-Host``,
an API key...), a cookie it neither keys nor ignores. Such a request is
answered from the cache, but its render serves it alone.

Nothing here does I/O: :func:`PageRules.plan` is pure, and admission by rank
(:mod:`webtier.pagecache.admission`) supplies the read that a miss sends in
the same round trip as its claim.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from webtier._core.keys import PageShard, check_name, shard_of
from webtier.config import Config, PageCacheSettings, valid_header_names
from webtier.errors import ConfigError, InvalidInput
from webtier.pagecache.admission import Admission, RankAdmission
from webtier.pagecache.holes import Visit
from webtier.pagecache.request import (
    PageRequest,
    cache_directives,
    cookie_pairs,
    is_ignored,
    is_private,
    matches,
    page_digest,
    wants_fresh,
)


@dataclass(frozen=True, slots=True)
class CacheRoute:
    """A route the application marks cacheable.

    ``path`` is a path, or a pattern with ``*`` (``/products/*``). ``vary``
    names the request headers the page depends on and ``cookies`` the
    cookies it reads (their values join the key). ``item_pages=True`` makes
    it an item route, cached the book's way: only pages with one ``item``
    parameter whose item is admitted (ranks in the top N); with
    ``item_in_path=True`` the item is what the path's final ``*`` matches
    (``CacheRoute("/item/*", item_pages=True, item_in_path=True)``: ``/item/42``
    is item 42's page), and a request whose ``item`` parameter names another
    item is left alone (its page would be stored as one item's and show
    another's). ``private=True``
    says the page is the same for signed-in users, so requests carrying a
    session cookie or ``Authorization`` may be answered from the cache too.
    ``ttl`` overrides the default freshness (seconds). ``holes=True`` says
    the page is the same for every visitor but its holes
    (:mod:`webtier.pagecache.holes`): requests carrying a session cookie
    are answered from the cache too, each visitor's holes filled from their
    session, read in the page's round trip. ``render_for`` (with
    ``holes=True``): a function of the visitor's
    :class:`~webtier.pagecache.holes.Visit`, true for a visitor whose page
    the app renders instead, never stored: their session holds something
    this route's page shows only once, such as a message the render takes.
    A cheap test of the session read in the page's round trip, no I/O.

    ``ignored_headers`` and ``ignored_cookies`` (default: the settings')
    name the headers and cookies trusted not to change this route's page. A
    request carrying any other header or cookie that is not in the key is
    answered from the cache, but its render is never stored."""

    path: str
    vary: tuple[str, ...] = ()
    ttl: float | None = None
    private: bool = False
    holes: bool = False
    item_pages: bool = False
    item_in_path: bool = False
    cookies: tuple[str, ...] = ()
    ignored_headers: tuple[str, ...] | None = None
    ignored_cookies: tuple[str, ...] | None = None
    render_for: Callable[[Visit], object] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path.startswith("/"):
            raise ConfigError(f"a cached route's path must start with '/' (got {self.path!r})")
        if not isinstance(self.vary, tuple) or not valid_header_names(self.vary):
            raise ConfigError(f"vary must be a tuple of header names (got {self.vary!r})")
        object.__setattr__(self, "vary", tuple(sorted({h.lower() for h in self.vary})))
        if self.ttl is not None and not (
            isinstance(self.ttl, int | float) and not isinstance(self.ttl, bool) and self.ttl > 0
        ):
            raise ConfigError(f"a route's ttl must be > 0 seconds (got {self.ttl!r})")
        for flag in ("private", "holes", "item_pages", "item_in_path"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be True or False")
        if self.render_for is not None and not (callable(self.render_for) and self.holes):
            raise ConfigError("render_for needs holes=True and a function of a Visit")
        if self.item_in_path and not (
            self.item_pages and self.path.endswith("/*") and "*" not in self.path[:-1]
        ):
            raise ConfigError(
                f"item_in_path needs item_pages=True and a path ending in '/*', its only "
                f"'*' (got {self.path!r})"
            )
        if not isinstance(self.cookies, tuple) or not _cookie_names(self.cookies):
            raise ConfigError(f"cookies must be a tuple of cookie names (got {self.cookies!r})")
        object.__setattr__(self, "cookies", tuple(sorted(set(self.cookies))))
        headers = self.ignored_headers
        if headers is not None:
            if not isinstance(headers, tuple) or not valid_header_names(headers):
                raise ConfigError(f"ignored_headers must be a tuple of header names ({headers!r})")
            object.__setattr__(self, "ignored_headers", tuple(sorted({h.lower() for h in headers})))
        cookies = self.ignored_cookies
        if cookies is not None and (not isinstance(cookies, tuple) or not _cookie_names(cookies)):
            raise ConfigError(f"ignored_cookies must be a tuple of cookie names ({cookies!r})")

    def matches(self, path: str) -> bool:
        return fnmatch.fnmatchcase(path, self.path) if "*" in self.path else path == self.path

    def path_item(self, path: str) -> str | None:
        """The item ``path`` names on an ``item_in_path`` route (one path
        segment), else None."""
        if not self.item_in_path:
            return None
        named = path[len(self.path) - 1 :]
        return named if named and "/" not in named else None


def _cookie_names(names: tuple[str, ...]) -> bool:
    return all(isinstance(n, str) and n and not any(c in n for c in "=; \t") for n in names)


@dataclass(frozen=True, slots=True)
class Plan:
    """Where a cacheable request's page lives and how it may be cached."""

    digest: str  # hex digest of the key material: the page's name in Redis
    shard: PageShard
    item: str | None  # the item whose pages this one counts among
    ttl: float  # seconds a stored copy is fresh at most
    vary: tuple[str, ...]  # request headers the page may vary on (they are in the key)
    admission: Admission | None  # None: admitted by the route itself
    # Inputs of the request that could reach the page but are not in the key
    # ("query utm_source", "header x-forwarded-host", "cookie theme"...): a
    # render of it must not be stored. Empty for most requests.
    unkeyed: tuple[str, ...] = ()
    holes: bool = False  # its route's pages have holes, filled per visitor
    render_for: Callable[[Visit], object] | None = None  # see CacheRoute

    def renders(self, visit: Visit) -> bool:
        """Whether ``visit``'s page is rendered by the app rather than
        answered from the cache (the route's ``render_for``)."""
        return self.render_for is not None and bool(self.render_for(visit))

    @property
    def storable(self) -> bool:
        """Whether a render of this request may be stored (and shared)."""
        return not self.unkeyed


# Methods whose responses are cached. HEAD is left to the app: its response
# has no body to store.
CACHED_METHODS = frozenset({"GET"})


@dataclass(frozen=True, slots=True)
class PageRules:
    """The application's caching rules: the routes it marks cacheable (the
    first that matches a path applies), and how item pages are admitted."""

    routes: tuple[CacheRoute, ...] = ()
    admission: Admission = field(default_factory=RankAdmission)

    def __post_init__(self) -> None:
        routes: object = self.routes
        if not isinstance(routes, tuple) or not all(isinstance(r, CacheRoute) for r in routes):
            raise ConfigError(f"routes must be a tuple of CacheRoute (got {self.routes!r})")

    def plan(self, cfg: Config, request: PageRequest) -> Plan | None:
        """The plan for ``request``, or None if the cache must leave it alone."""
        settings = cfg.pagecache
        if request.method not in CACHED_METHODS:
            return None
        route = next((r for r in self.routes if r.matches(request.path)), None)
        if route is None:
            return None
        # (Most pages have no query: nothing to parse.)
        params = parse_qsl(request.query, keep_blank_values=True) if request.query else []
        if any(name == settings.dynamic_param for name, _ in params):
            return None  # the book's mark of a dynamic page
        clear, item = _named_item(settings, route, request.path, params)
        if not clear or (route.item_pages and item is None):
            return None
        headers = request.headers
        if not (route.private or route.holes) and is_private(settings, headers):
            return None
        if settings.honor_no_cache and wants_fresh(headers):
            return None  # a render of its own, straight from the app
        vary = route.vary
        if settings.proxy_headers:
            vary = tuple(sorted({*vary, *settings.proxy_headers}))
        digest = page_digest(settings, request, params, vary, route.cookies)
        shard_number = (
            shard_of(item, settings.shards)
            if item is not None
            else int(digest[:8], 16) % settings.shards
        )
        ttl = settings.ttl if route.ttl is None else min(route.ttl, settings.ttl)
        return Plan(
            digest,
            cfg.keys.page_shard(shard_number),
            item,
            ttl,
            vary,
            self.admission if route.item_pages else None,
            unkeyed_inputs(settings, route, vary, request, params),
            route.holes,
            route.render_for,
        )

    def holes_at(self, path: str) -> bool:
        """Whether the route of ``path`` has pages with holes: every answer
        of it is filled, whether or not the cache may answer it."""
        route = next((r for r in self.routes if r.matches(path)), None)
        return route is not None and route.holes

    def item_of(self, cfg: Config, request: PageRequest) -> str | None:
        """The item whose page ``request`` asks for on an item route,
        whether or not the cache may answer it (any method, any cookie),
        else None."""
        route = next((r for r in self.routes if r.matches(request.path)), None)
        if route is None or not route.item_pages:
            return None
        params = parse_qsl(request.query, keep_blank_values=True) if request.query else []
        return _named_item(cfg.pagecache, route, request.path, params)[1]


def _named_item(
    settings: PageCacheSettings, route: CacheRoute, path: str, params: Sequence[tuple[str, str]]
) -> tuple[bool, str | None]:
    """Whether the request names its item clearly, and the item it names
    (one valid ``item`` parameter, or the path's on an ``item_in_path``
    route)."""
    items = [value for name, value in params if name == settings.item_param]
    if route.item_in_path:
        named = route.path_item(path)
        if any(value != named for value in items):
            # Two items named (/item/2?item=1): stored as either, the page
            # would be kept past the other's invalidation, or admitted by
            # the other's rank.
            return False, None
        items = [named] if named is not None else []
    item = items[0] if len(items) == 1 else None
    if item is not None:
        try:
            check_name("item", item)
        except InvalidInput:
            item = None
    return True, item


# The book's rule on every path: a page with one `item` parameter whose item
# ranks in the top N. For the book's functions, whose requests are URLs
# alone; a web application declares its own item routes.
BOOK_RULES = PageRules(routes=(CacheRoute("/*", item_pages=True),))


# Request headers the cache handles itself: never an input of the page.
# (The host is in the key; the cache compresses, answers conditional
# requests and reads Cache-Control itself; the rest describe the connection.)
CACHE_HEADERS = frozenset(
    {
        "host",
        "accept-encoding",
        "if-none-match",
        "if-modified-since",
        "cache-control",
        "pragma",
        "connection",
        "keep-alive",
        "te",
    }
)


# Characters a query string may hold as they are: printable ASCII but those
# browsers escape in a query (the WHATWG URL standard's special-query set:
# '"', '#', '<', '>', "'"; space, controls and non-ASCII too). A query
# holding one raw was written by hand, and a page that reflects the raw
# query would show it where a browser's request under the same key shows
# an escape.
_QUERY_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F)) - frozenset("\"#<>'")


def unkeyed_inputs(
    settings: PageCacheSettings,
    route: CacheRoute,
    vary: Sequence[str],
    request: PageRequest,
    params: Sequence[tuple[str, str]],
) -> tuple[str, ...]:
    """The inputs of ``request`` that could reach the page but are not in
    its key (nor trusted not to change it); empty when a render may be stored."""
    found: list[str] = []
    found += [f"query {name}" for name, _ in params if is_ignored(settings, name)]
    if not _QUERY_CHARS.issuperset(request.query):
        found.append("query characters")
    ignored = settings.ignored_headers if route.ignored_headers is None else route.ignored_headers
    for name in request.headers:
        if name in CACHE_HEADERS or name in vary or name == "cookie":
            continue
        if name == "authorization" and route.private:
            continue  # the route says signed-in users see the same page
        if name == "content-length" and request.headers[name].strip() == "0":
            continue  # no body (a body, of a "fat GET", is an input)
        if not matches(ignored, name):
            found.append(f"header {name}")
    cookie = request.headers.get("cookie")
    if cookie and "cookie" not in vary:
        harmless = (
            settings.ignored_cookies if route.ignored_cookies is None else route.ignored_cookies
        )
        for name, _ in cookie_pairs(cookie):
            if name in route.cookies or matches(harmless, name):
                continue
            if (route.private or route.holes) and name in settings.private_cookies:
                continue  # the same page for every session (holes: but its holes)
            found.append(f"cookie {name}")
    control = request.headers.get("cache-control")
    if control is not None and "no-store" in cache_directives(control):
        found.append("cache-control no-store")  # RFC 9111 5.2.1.5: store nothing of it
    return tuple(dict.fromkeys(found))
