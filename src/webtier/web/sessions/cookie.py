"""The session cookie: its value (the token, HMAC-signed when keys are set),
read back with no Redis call, and its attributes."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import ipaddress
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from http.cookies import Morsel

from webtier.sessions.tokens import is_token
from webtier.web.sessions.options import SessionOptions

_MAC = re.compile(r"[A-Za-z0-9_-]{43}")  # an unpadded URL-safe base64 SHA-256

log = logging.getLogger("webtier.sessions.cookie")

# Headers a reverse proxy adds: a request carrying one came through a proxy,
# so the scheme and peer the app sees are the proxy's, not the browser's.
PROXY_HEADERS = frozenset({"forwarded", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host"})


# Made once per visitor and key: a request checks its cookie once or more
# (the session middleware, and often a CSRF guard in front of it), and the
# visitor's next requests carry the same cookie.
@functools.lru_cache(maxsize=4096)
def _mac(key: bytes, name: str, token: str) -> str:
    # The cookie's name is signed too: a value signed for one cookie is
    # refused in another that shares the key.
    digest = hmac.new(key, f"{name}\0{token}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def encode(options: SessionOptions, token: str) -> str:
    """The cookie value carrying ``token``: the token itself, or
    ``token.mac`` when signing keys are set."""
    if not options.keys:
        return token
    return f"{token}.{_mac(options.keys[0], options.cookie_name, token)}"


@dataclass(frozen=True)
class Decoded:
    token: str | None  # None: no cookie, or one to refuse
    present: bool  # a cookie of ours came (valid or not)
    stale_key: bool = False  # signed with an older key: sign it again


def decode(options: SessionOptions, cookie_header: str | None) -> Decoded:
    """The token in the request's ``Cookie`` header, checked with no Redis
    call: a token of the wrong shape, or a signature no key makes, is None.
    When the cookie comes more than once (another path or domain set one
    too), the first valid one wins: browsers send the most specific first."""
    values = _values(cookie_header or "", options.cookie_name)
    for value in values:
        token, stale = _verify(options, value)
        if token is not None:
            return Decoded(token, True, stale)
    return Decoded(None, bool(values))


def _values(header: str, name: str) -> list[str]:
    # By hand rather than with a cookie parser: they keep one value per
    # name, and the one they keep may be another path's stale cookie.
    found = []
    for pair in header.split(";"):
        key, sep, value = pair.partition("=")
        if sep and key.strip() == name:
            found.append(value.strip())
    return found


def _verify(options: SessionOptions, value: str) -> tuple[str | None, bool]:
    """(the token, signed with an older key) if ``value`` is a valid cookie."""
    if not options.keys:
        # Only tokens webtier issues, whatever the tier's strict setting.
        return (value if is_token(value) else None), False
    token, _, mac = value.partition(".")
    # Shape first: compare_digest refuses non-ASCII strings.
    if not is_token(token) or not _MAC.fullmatch(mac):
        return None, False
    for index, key in enumerate(options.keys):
        if hmac.compare_digest(mac, _mac(key, options.cookie_name, token)):
            return token, index > 0
    return None, False


def came_through_proxy(header_names: Iterable[str]) -> bool:
    """Whether a request with these header names (any case) was proxied."""
    return any(name.lower() in PROXY_HEADERS for name in header_names)


# Both parse an address on every request that sets a cookie (ipaddress is
# slow); the same few hosts and peers come again and again.
@functools.lru_cache(maxsize=1024)
def is_remote_peer(peer: str) -> bool:
    """Whether ``peer`` (the address the request came from) is an IP
    address of another machine; a name (a test client's) or nothing (a unix
    socket) is not."""
    try:
        return not ipaddress.ip_address(peer).is_loopback
    except ValueError:
        return False


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a Host header: name or address, maybe a port) names
    this machine."""
    # Longer than a name (253 characters) and a port, it names no machine
    # (and is not kept: a client could fill the cache with such headers).
    return len(host) <= 260 and _is_loopback(host)


@functools.lru_cache(maxsize=1024)
def _is_loopback(host: str) -> bool:
    if host.startswith("["):
        name = host[1 : host.find("]")] if "]" in host else host
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    name = name.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Where:
    """What the cookie's attributes depend on in the request."""

    mount: str  # where the app is mounted: "" at the top
    scheme: str  # "http" or "https", as the server saw it
    host: str  # the Host header
    peer: str = ""  # the address the request came from ("": unknown, a unix socket)
    proxied: bool = False  # it carried a reverse proxy's headers (Forwarded...)

    @property
    def local_development(self) -> bool:
        """Plain http from this machine to this machine, straight from the
        browser: a loopback Host, no remote peer, no proxy in between. A
        remote client cannot fake it: its peer address is its own, and
        proxy headers it adds only keep ``Secure``."""
        return (
            self.scheme == "http"
            and is_loopback(self.host)
            and not is_remote_peer(self.peer)
            and not self.proxied
        )


def cookie_morsel(options: SessionOptions, where: Where, value: str | None) -> Morsel[str]:
    """The cookie carrying ``value`` (None: deleting it), with its attributes."""
    morsel: Morsel[str] = Morsel()
    morsel.set(options.cookie_name, value or "", value or "")
    morsel["path"] = options.path or where.mount or "/"
    if options.domain:
        morsel["domain"] = options.domain
    # Not readable from scripts (XSS cannot steal it), not sent cross-site
    # on subrequests or POSTs (CSRF), never over plain http but in local
    # development (where a Secure cookie from http://localhost is dropped
    # by some browsers and by test clients, and the session with it).
    morsel["httponly"] = True
    morsel["samesite"] = options.same_site.capitalize()
    if options.insecure_local_http and where.local_development:
        _explain_insecure_cookie(where.host)
    else:
        morsel["secure"] = True
    if value is None:
        morsel["max-age"] = 0
        morsel["expires"] = "Thu, 01 Jan 1970 00:00:00 GMT"
    elif options.max_age is not None:
        morsel["max-age"] = options.max_age
    return morsel


@functools.cache
def _explain_insecure_cookie(host: str) -> None:
    """Says once per host why a cookie went out without ``Secure``."""
    log.warning(
        "session cookie sent without Secure to http://%s: plain http to a loopback host "
        "is local development (SessionOptions(insecure_local_http=False) to always send Secure)",
        host,
    )
