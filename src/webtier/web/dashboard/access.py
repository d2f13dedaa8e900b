"""Who may read the dashboard: a token or HTTP basic credentials.

On a loopback bind the dashboard may run open; anywhere else it refuses to
start without credentials (:func:`check_bind`). Open, it answers only
requests whose ``Host`` names this machine (:class:`HostCheck`): a web page
the operator visits cannot rebind its own name to 127.0.0.1 and read it.
Secrets are compared in constant time. A token is given as ``Authorization:
Bearer <token>``, or once as ``?token=<token>``, which a browser then keeps
in an HttpOnly cookie.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.datastructures import URL, Headers, QueryParams
from starlette.requests import cookie_parser
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from webtier.errors import ConfigError
from webtier.web.sessions.adapter import header_values
from webtier.web.sessions.cookie import is_loopback as names_this_machine

COOKIE = "webtier_dashboard"


@dataclass(frozen=True, slots=True)
class Credentials:
    """The dashboard's credentials; none at all leaves it open (loopback only)."""

    token: str | None = None
    user: str | None = None  # HTTP basic, with password
    password: str | None = None

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token) < 16:
            raise ConfigError("the dashboard token must have at least 16 characters")
        if (self.user is None) != (self.password is None) or self.password == "":
            raise ConfigError("HTTP basic credentials need both a user and a password")

    @classmethod
    def basic(cls, pair: str) -> Credentials:
        """From ``user:password``."""
        user, colon, password = pair.partition(":")
        if not colon or not user or not password:
            raise ConfigError("basic credentials must read user:password")
        return cls(user=user, password=password)

    @property
    def required(self) -> bool:
        return self.token is not None or self.user is not None

    def accepts(self, headers: Headers, cookie: str | None) -> bool:
        """Whether a request's credentials match (every comparison runs, in
        constant time, whichever kind is configured)."""
        scheme, _, value = headers.get("authorization", "").partition(" ")
        scheme = scheme.lower()
        ok = False
        if self.token is not None:
            given = value if scheme == "bearer" else cookie or ""
            ok |= _same(given, self.token)
        if self.user is not None and self.password is not None:
            user, password = _basic(value) if scheme == "basic" else ("", "")
            same_user = _same(user, self.user)
            same_password = _same(password, self.password)
            ok |= same_user & same_password
        return ok


def _same(given: str, secret: str) -> bool:
    """Whether ``given`` is ``secret``, in constant time, whatever it holds."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), secret.encode())


def _basic(value: str) -> tuple[str, str]:
    try:
        decoded = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return "", ""
    user, _, password = decoded.partition(":")
    return user, password


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, credentials: Credentials) -> None:
    """Refuse to serve beyond this machine without credentials."""
    if not is_loopback(host) and not credentials.required:
        raise ConfigError(
            f"the dashboard binds {host}, beyond this machine: give it --token or --basic "
            "(or WEBTIER_DASHBOARD_TOKEN / WEBTIER_DASHBOARD_BASIC)"
        )


class AccessMiddleware:
    """Answers 401 to requests without the configured credentials."""

    def __init__(self, app: ASGIApp, credentials: Credentials) -> None:
        self.app, self.credentials = app, credentials

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.credentials.required:
            await self.app(scope, receive, send)
            return
        response = self._refusal(scope)
        if response is None:
            await self.app(scope, receive, send)
        else:
            await response(scope, receive, send)

    def _refusal(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        cookies = cookie_parser(headers.get("cookie", ""))
        if self.credentials.accepts(headers, cookies.get(COOKIE)):
            return None
        url = URL(scope=scope)
        given = QueryParams(url.query).get("token")
        token = self.credentials.token
        # Bytes: compare_digest refuses a str with non-ASCII characters.
        if given is not None and token is not None and _same(given, token):
            # Keep the token in a cookie and drop it from the address bar.
            response = RedirectResponse(url.remove_query_params("token"), status_code=303)
            path = scope.get("root_path", "") or "/"
            response.set_cookie(COOKIE, token, path=path, httponly=True, samesite="strict")
            return response
        challenge = {"WWW-Authenticate": 'Basic realm="webtier"'} if self.credentials.user else {}
        return PlainTextResponse("401: credentials needed", status_code=401, headers=challenge)


class HostCheck:
    """Answers 400 to a request whose ``Host`` is neither this machine
    (``localhost``, a loopback address, with any port) nor one of
    ``allowed`` (names, without port). An app open on a loopback bind needs
    it: otherwise a page of ``evil.example`` whose name the attacker points
    at 127.0.0.1 (DNS rebinding) reads it from the operator's browser."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str] = ()) -> None:
        self.app, self.allowed = app, frozenset(name.lower().rstrip(".") for name in allowed)

    def accepts(self, host: str) -> bool:
        if names_this_machine(host):
            return True
        name = host[: host.rfind(":")] if host.rfind(":") > host.rfind("]") else host
        return name.lower().rstrip(".") in self.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if self.accepts(header_values(scope.get("headers", []), b"host") or ""):
            await self.app(scope, receive, send)
            return
        refusal = PlainTextResponse("400: this server answers to its own host names only", 400)
        await refusal(scope, receive, send)
