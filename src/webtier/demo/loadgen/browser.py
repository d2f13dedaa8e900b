"""What the load generator needs of a browser, and no more: a visitor's
cookies (kept per visitor, sent back on every request, dropped when the
shop deletes them), the CSRF token of a page's form, and where a target
URL points.

Pure functions over text and headers, so they are tested without a server.
"""

from __future__ import annotations

import html
import ipaddress
import re
import socket
import time
from email.utils import parsedate_to_datetime
from http.cookies import CookieError, SimpleCookie
from urllib.parse import urlsplit

from webtier.errors import ConfigError

# An <input> whose name is csrftoken, whatever the attributes' order.
_TOKEN_INPUT = re.compile(r"""<input\b[^>]*\bname\s*=\s*["']?csrftoken\b[^>]*>""", re.I)
_VALUE = re.compile(r"""\bvalue\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
_ACTION = re.compile(r"""\baction\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
_FORM = re.compile(r"(<form\b[^>]*>)(.*?)</form\s*>", re.I | re.S)


def form_token(page: str, action: str | None = None) -> str | None:
    """The value of the ``<input name="csrftoken">`` of the first form of
    ``page`` that posts to ``action`` (any form when ``None``); ``None``
    when the page has no such form."""
    if action is not None:
        for form in _FORM.finditer(page):
            if _action_of(form.group(1)) == action:
                return form_token(form.group(2))
        return None
    found = _TOKEN_INPUT.search(page)
    if found is None:
        return None
    value = _VALUE.search(found.group(0))
    if value is None:
        return None
    return html.unescape(_first(value.groups()))


def _action_of(form_tag: str) -> str | None:
    found = _ACTION.search(form_tag)
    return None if found is None else html.unescape(_first(found.groups()))


def _first(groups: tuple[str | None, ...]) -> str:
    return next(group for group in groups if group is not None)


def absorb_cookies(cookies: dict[str, str], set_cookie_headers: list[str]) -> None:
    """Apply a response's ``Set-Cookie`` headers to a visitor's ``cookies``.

    Every cookie of the shop is for its whole host, so name and value are
    all that is kept; ``Secure`` is ignored, as browsers do for loopback
    hosts. A cookie that expired (``Max-Age=0`` or a past ``Expires``) is
    removed: that is how a shop ends a session in the browser.
    """
    for header in set_cookie_headers:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(header)
        except CookieError:
            continue  # a browser ignores what it cannot parse, too
        for name, morsel in jar.items():
            if _expired(morsel["max-age"], morsel["expires"]):
                cookies.pop(name, None)
            else:
                cookies[name] = morsel.value


def _expired(max_age: str, expires: str) -> bool:
    try:
        if max_age:
            return int(max_age) <= 0
        return bool(expires) and parsedate_to_datetime(expires).timestamp() < time.time()
    except (TypeError, ValueError):
        return False  # unreadable: kept, as a browser keeps a session cookie


def cookie_header(cookies: dict[str, str]) -> dict[str, str]:
    """The request headers that send ``cookies`` (none when there are none)."""
    if not cookies:
        return {}
    return {"cookie": "; ".join(f"{name}={value}" for name, value in cookies.items())}


def check_target(url: str, *, allow_remote: bool = False) -> str:
    """``url`` without a trailing slash, once checked to be an http(s) URL
    of this machine (every address its host resolves to is loopback),
    unless ``allow_remote``: a load generator aimed at someone else's
    server by a typo is an attack. Raises :class:`ConfigError`."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"not an http:// or https:// URL: {url!r}")
    if not allow_remote and not _is_loopback(parts.hostname):
        raise ConfigError(
            f"{parts.hostname} is not this machine: loadgen drives a shop on loopback "
            "(localhost, 127.0.0.1, ::1) unless given --allow-remote"
        )
    return url.rstrip("/")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass  # a name: look at every address it stands for
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False  # not resolvable: certainly not known to be this machine
    addresses = {info[4][0] for info in found}
    return bool(addresses) and all(
        ipaddress.ip_address(str(a).split("%", 1)[0]).is_loopback for a in addresses
    )
