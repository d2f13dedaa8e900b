"""HTTP policy of the page cache, shared by the ASGI and the WSGI middleware.

Which responses may be stored (:func:`store_ttl`), what a cached page is
answered with (:func:`page_response`: gzip when the client takes it, ``304``
for a matching ``If-None-Match``, ``X-Cache`` and ``Age``), how Redis outages
are logged (once per interval) and how outcomes are counted. No I/O.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from webtier import sessions
from webtier._core.throttle import OutageLog, Throttle
from webtier.config import Config, PageCacheSettings
from webtier.errors import ConfigError
from webtier.pagecache import PageRequest, PageRules, Plan, holes
from webtier.pagecache.copies import decode, stored_headers, weak_etag
from webtier.pagecache.request import cache_directives, is_private
from webtier.sessions.users import cart_of
from webtier.types import CacheStatus, Page, Rendered

log = logging.getLogger("webtier.pagecache")

Headers = tuple[tuple[str, str], ...]

COUNTERS = {"HIT": "pagecache:hit", "MISS": "pagecache:miss", "STALE": "pagecache:stale"}
# Counted apart from the outcomes: a MISS may share another request's render,
# and a render may fail to be stored; this is what the app's CPU paid.
RENDERS = "pagecache:render"


def store_ttl(
    settings: PageCacheSettings, plan: Plan, status: int, headers: Headers
) -> float | None:
    """Seconds the response may be cached for, or None if it must not be:
    its request had inputs the key lacks (:attr:`Plan.unkeyed`), it is not
    a 200, sets a cookie, has ``Cache-Control`` private/no-store/no-cache or
    ``max-age=0``, varies on a header the route did not declare, or has no
    ``Content-Length`` (streamed) or one over ``max_body``."""
    if status != 200 or not plan.storable:
        return None
    ttl = plan.ttl
    length = False
    for name, value in headers:
        name = name.lower()
        if name == "set-cookie":
            return None
        if name == "content-length":
            if not value.strip().isdigit() or int(value) > settings.max_body:
                return None
            length = True
        elif name == "cache-control":
            directives = cache_directives(value)
            if directives.keys() & {"private", "no-store", "no-cache"}:
                return None
            for age in ("s-maxage", "max-age"):
                if age in directives:
                    try:
                        ttl = min(ttl, float(directives[age]))
                    except ValueError:
                        return None
                    break
        elif name == "vary":
            for header in value.split(","):
                header = header.strip().lower()
                undeclared = header and header not in plan.vary and header != "accept-encoding"
                if header == "*" or undeclared:
                    return None
        elif name == "content-encoding" and "accept-encoding" not in plan.vary:
            return None  # an encoded body, but the key does not say for whom
    return ttl if length and ttl > 0 else None


def accepts_gzip(headers: Mapping[str, str]) -> bool:
    for coding in headers.get("accept-encoding", "").split(","):
        name, _, params = coding.strip().partition(";")
        if name.strip().lower() in ("gzip", "*"):
            return params.replace(" ", "").lower() not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


def _etag_matches(etag: str, if_none_match: str) -> bool:
    if if_none_match.strip() == "*":
        return True
    ours = etag.removeprefix("W/")  # weak comparison (RFC 9110 13.1.2)
    return any(tag.strip().removeprefix("W/") == ours for tag in if_none_match.split(","))


def page_response(
    page: Page,
    request_headers: Mapping[str, str],
    outcome: CacheStatus,
    now: float | None = None,
    visit: holes.Visit = holes.ANONYMOUS,
    fill: holes.Holes | None = None,
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body answering a request from ``page``."""
    return Prepared(page).response(request_headers, outcome, now, visit, fill)


_NOT_MODIFIED_HEADERS = frozenset(
    {"etag", "cache-control", "vary", "expires", "last-modified", "x-cache", "age"}
)


def _not_modified(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k in _NOT_MODIFIED_HEADERS]


class Prepared:
    """What answers every request from one page: its headers as sent (but
    ``X-Cache`` and ``Age``), its plain body once unpacked (and, for a page
    with holes, its parts between holes once compressed). Kept by
    :class:`HotPages` while the page is served, so a hit does that work once."""

    __slots__ = ("_anonymous", "_packed", "_plain", "headers", "page")

    def __init__(self, page: Page) -> None:
        self.page = page
        headers = [(k, v) for k, v in stored_headers(page.headers) if k != "vary"]
        vary = [v for k, v in page.headers if k.lower() == "vary"]
        if page.gzipped:
            vary.append("Accept-Encoding")
        if vary:
            headers.append(("vary", ", ".join(vary)))
        self.headers = headers
        self._plain: bytes | None = None
        self._packed: list[bytes] | None = None
        # A page with holes as every visitor without a session gets it (most
        # of its answers), made once.
        self._anonymous: _Filled | None = None

    def plain_body(self) -> bytes:
        if self._plain is None:
            self._plain = self.page.plain_body()
        return self._plain

    def response(
        self,
        request_headers: Mapping[str, str],
        outcome: CacheStatus,
        now: float | None = None,
        visit: holes.Visit = holes.ANONYMOUS,
        fill: holes.Holes | None = None,
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """Status, headers and body answering a request from the page; a
        page with holes has them filled for ``visit`` by ``fill``."""
        page = self.page
        now = time.time() if now is None else now
        age = str(max(0, int(now - page.stored)))
        headers = [*self.headers, ("x-cache", outcome), ("age", age)]
        if page.holes:
            return self._filled(request_headers, headers, visit, fill)
        if_none_match = request_headers.get("if-none-match")
        if if_none_match is not None and _etag_matches(page.etag, if_none_match):
            return 304, _not_modified(headers), b""
        if page.gzipped and accepts_gzip(request_headers):
            body = page.body
            headers.append(("content-encoding", "gzip"))
        else:
            body = self.plain_body()
        headers.append(("content-length", str(len(body))))
        return page.status, headers, body

    def _filled(
        self,
        request_headers: Mapping[str, str],
        headers: list[tuple[str, str]],
        visit: holes.Visit,
        fill: holes.Holes | None,
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """The answer of a page with holes: its tag is the filled page's,
        so a visitor's browser revalidates what that visitor saw."""
        page, plain = self.page, self.plain_body()
        places = page.holes
        known = self._anonymous
        if visit is holes.ANONYMOUS and known is not None and known.fill is fill:
            filled = known
        else:
            # Without the app's holes (a page stored with holes, served by a
            # layer given none) each hole stays empty.
            fills = fill.fills_for(places, visit) if fill is not None else [b""] * len(places)
            filled = _Filled(fill, fills, holes.filled(plain, places, fills))
            if visit is holes.ANONYMOUS:  # the same for every such visitor
                self._anonymous = filled
        body = filled.body
        headers.append(("etag", filled.etag))
        if_none_match = request_headers.get("if-none-match")
        if if_none_match is not None and _etag_matches(filled.etag, if_none_match):
            return 304, _not_modified(headers), b""
        if page.gzipped and accepts_gzip(request_headers):
            if filled.gzipped is None:
                if self._packed is None:
                    self._packed = [holes.deflated(part) for part in holes.segments(plain, places)]
                filled.gzipped = holes.gzip_filled(self._packed, filled.fills, body)
            body = filled.gzipped
            headers.append(("content-encoding", "gzip"))
        headers.append(("content-length", str(len(body))))
        return page.status, headers, body


class _Filled:
    """A page's body with its holes filled for one visit, its tag, and its
    gzip once a client asked for it."""

    __slots__ = ("body", "etag", "fill", "fills", "gzipped")

    def __init__(self, fill: holes.Holes | None, fills: list[bytes], body: bytes) -> None:
        self.fill, self.fills, self.body = fill, fills, body
        self.etag = weak_etag(body)
        self.gzipped: bytes | None = None


class HotPages:
    """The pages this process served last, decoded and prepared, by digest,
    with the stored copy each came from: a hit whose copy is the same bytes
    (the page was not stored again meanwhile) skips decoding, unpacking and
    its headers. At most ``entries`` pages of at most ``max_bytes`` each;
    the oldest goes first."""

    def __init__(self, entries: int = 256, max_bytes: int = 64 * 1024) -> None:
        self.entries, self.max_bytes = entries, max_bytes
        self._pages: dict[str, tuple[bytes, Prepared | None]] = {}

    def get(self, digest: str, copy: bytes) -> Prepared | None:
        """The prepared page of ``copy`` (None for a pass note)."""
        known = self._pages.get(digest)
        if known is not None and known[0] == copy:
            return known[1]
        page = decode(copy)
        prepared = None if page is None else Prepared(page)
        if len(copy) <= self.max_bytes:
            if known is None and len(self._pages) >= self.entries:
                del self._pages[next(iter(self._pages))]
            self._pages[digest] = (copy, prepared)
        return prepared


def rendered_response(rendered: Rendered) -> tuple[int, list[tuple[str, str]], bytes]:
    """An uncached render, marked as a miss."""
    headers = [(k, v) for k, v in rendered.headers if k.lower() != "x-cache"]
    return rendered.status, [*headers, ("x-cache", "MISS")], rendered.body


def visit_of(cfg: Config, fields: Mapping[str, bytes] | None) -> holes.Visit:
    """What a page's holes know of the visitor whose session's hash is
    ``fields`` (None: no live session)."""
    if fields is None:
        return holes.ANONYMOUS
    user = fields.get("u")
    return holes.Visit(
        user.decode() if user else None,
        sessions.ops.data_of(fields),
        cart_of(fields),
        tuple(sessions.ops.viewed_of(cfg, fields)),
    )


def filled_render(
    rendered: Rendered,
    headers: list[tuple[str, str]],
    fill: holes.Holes | None,
    visit: holes.Visit,
) -> tuple[int, list[tuple[str, str]], bytes]:
    """A render not stored, answered with its holes (if any) filled."""
    if not rendered.holes:
        return rendered.status, headers, rendered.body
    places = rendered.holes
    fills = fill.fills_for(places, visit) if fill is not None else [b""] * len(places)
    body = holes.filled(rendered.body, places, fills)
    kept = [(k, v) for k, v in headers if k.lower() not in ("content-length", "etag")]
    return rendered.status, [*kept, ("content-length", str(len(body)))], body


class Policy:
    """What both middlewares hold: the rules, the settings, the outage log."""

    def __init__(self, config: Config, rules: PageRules, fills_holes: bool = False) -> None:
        if not isinstance(rules, PageRules):
            raise ConfigError(f"the page cache needs its PageRules (got {rules!r})")
        self.config = config
        self.rules = rules
        # Whether the middleware fills the holes of pages of routes with
        # holes=True; one that does not answers only visitors without a
        # session from them, as from any other route.
        self.fills_holes = fills_holes
        self.settings = config.pagecache
        self.outage = OutageLog(
            "webtier.pagecache",
            self.settings.error_interval,
            "page cache: Redis unavailable, serving uncached",
        )
        self.unkeyed = UnkeyedLog(self.settings.error_interval)

    def plan(self, request: PageRequest) -> Plan | None:
        plan = self.rules.plan(self.config, request)
        if plan is None:
            return None
        if plan.holes and not self.fills_holes and is_private(self.settings, request.headers):
            return None
        if plan.unkeyed:
            self.unkeyed.report(plan, request)
        return plan

    def holes_at(self, request: PageRequest) -> bool:
        return self.rules.holes_at(request.path)

    def item_of(self, request: PageRequest) -> str | None:
        """The item of an item route's page, cacheable or not."""
        return self.rules.item_of(self.config, request)

    def counters(self, outcome: CacheStatus, rendered: bool) -> tuple[str, ...]:
        """The counters an answer adds one to (none when counting is off):
        its outcome's, and the renders' when the app rendered the page."""
        if not self.settings.counters:
            return ()
        return (COUNTERS[outcome], RENDERS) if rendered else (COUNTERS[outcome],)


class UnkeyedLog:
    """Says, at most once per interval, that requests carried a header or
    cookie their page's key lacks: their renders are not stored. Behind a
    proxy or load balancer that adds headers of its own, every render may be
    lost this way until the headers are declared. Dropped query parameters
    (utm_*...) are expected and not reported."""

    def __init__(self, interval: float) -> None:
        self._throttle = Throttle(interval)

    def report(self, plan: Plan, request: PageRequest) -> None:
        names = [n for n in plan.unkeyed if n.startswith(("header ", "cookie "))]
        if not names:
            return
        if count := self._throttle.due():
            log.info(
                "page cache: %d request(s) carried inputs their page's key lacks; a render of "
                "one is never stored (latest: %s, on %r); declare them in CacheRoute "
                "vary / cookies / ignored_headers / ignored_cookies or "
                "PageCacheSettings.proxy_headers",
                count,
                ", ".join(repr(n) for n in names),
                request.path,
            )


def lower_headers(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Request headers by lower-case name, repeats joined with ', '."""
    found: dict[str, str] = {}
    for name, value in pairs:
        name = name.lower()
        joint = "; " if name == "cookie" else ", "
        found[name] = f"{found[name]}{joint}{value}" if name in found else value
    return found
