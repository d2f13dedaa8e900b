"""What the page cache reads of a request, and the key of its page.

A page's key is a digest of the method, scheme, host, path, the *normalized*
query string (parameters in name order, tracking parameters dropped) and the
values of the declared vary headers and cookies, nothing else; no request
text ever reaches a Redis key (only its digest does). Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import quote, urlencode, urlsplit

from webtier.config import PageCacheSettings
from webtier.errors import InvalidInput


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


def matches(names: frozenset[str] | tuple[str, ...], name: str) -> bool:
    """Whether ``name`` is one of ``names``, where a name ending in '*'
    stands for every name starting with the rest."""
    exact, prefixes = _split_names(names)
    return name in exact or name.startswith(prefixes)


@lru_cache(maxsize=256)
def _split_names(names: frozenset[str] | tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """Exact names, and the prefixes of the names ending in '*' (once per set)."""
    return (
        frozenset(n for n in names if not n.endswith("*")),
        tuple(n[:-1] for n in names if n.endswith("*")),
    )


def cache_directives(value: str) -> dict[str, str]:
    """The directives of a ``Cache-Control`` value, by lower-case name."""
    found = {}
    for part in value.split(","):
        name, _, arg = part.strip().partition("=")
        if name:
            found[name.lower()] = arg.strip().strip('"')
    return found


def wants_fresh(headers: Mapping[str, str]) -> bool:
    """Whether the request asks not to be answered from a cache:
    ``Cache-Control: no-cache``, or ``Pragma: no-cache`` without
    ``Cache-Control`` (RFC 9111 5.4). ``max-age=0``, a plain reload, does not."""
    control = headers.get("cache-control")
    if control is not None:
        return "no-cache" in cache_directives(control)
    pragma = headers.get("pragma", "")
    return any(part.strip().lower() == "no-cache" for part in pragma.split(","))


def cookie_pairs(header: str) -> list[tuple[str, str]]:
    """The (name, value) pairs of a ``Cookie`` header, in order."""
    pairs = []
    for crumb in header.split(";"):
        name, _, value = crumb.partition("=")
        if name.strip() or value.strip():
            pairs.append((name.strip(), value.strip()))
    return pairs


def is_private(settings: PageCacheSettings, headers: Mapping[str, str]) -> bool:
    """Whether a request carries credentials: ``Authorization`` or a session cookie."""
    if "authorization" in headers:
        return True
    cookie = headers.get("cookie")
    if not cookie:
        return False
    return any(name in settings.private_cookies for name, _ in cookie_pairs(cookie))


def is_ignored(settings: PageCacheSettings, name: str) -> bool:
    """Whether a query parameter is dropped from keys (a tracking parameter)."""
    return matches(settings.ignored_params, name)


def normalized_query(settings: PageCacheSettings, params: Sequence[tuple[str, str]]) -> str:
    """Parameters in name order (repeats keep their order), tracking ones dropped."""
    if not params:
        return ""
    kept = sorted((p for p in params if not is_ignored(settings, p[0])), key=lambda p: p[0])
    return urlencode(kept, quote_via=quote)


def page_digest(
    settings: PageCacheSettings,
    request: PageRequest,
    params: Sequence[tuple[str, str]],
    vary: Sequence[str],
    cookies: Sequence[str] = (),
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
    if cookies:
        # A part without '=' (no header part lacks one) starts the cookies.
        crumbs = cookie_pairs(request.headers.get("cookie", ""))
        parts.append("cookies")
        parts += [json.dumps([name, [v for n, v in crumbs if n == name]]) for name in cookies]
    material = "".join(f"{len(p.encode())}:{p}" for p in parts)
    return hashlib.blake2b(material.encode(), digest_size=16).hexdigest()
