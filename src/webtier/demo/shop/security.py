"""The shop's defences: security headers, CSRF tokens, hardened cookies.

CSRF is asgi-csrf's (a signed token in a ``csrftoken`` cookie that every
POST's ``csrftoken`` form field must match), not hand-rolled. Pages are
rendered with a placeholder where the token goes and :class:`TokenFill`
writes the visitor's token in as the page leaves, outside the page cache:
a cached item page holds no one's token, and each visitor's copy holds
their own.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable
from typing import Any

from asgi_csrf import Errors, asgi_csrf  # type: ignore[import-untyped]
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from webtier.demo.shop.context import CSRF_PLACEHOLDER, Visitor, shop_of
from webtier.web.sessions.asgi import scope_where

CSRF_COOKIE = "csrftoken"

# No inline script or style anywhere: the shop has none, and an injected
# one would not run. Forms post to the shop only; no one may frame it.
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


Headers = list[tuple[bytes, bytes]]


class _HeaderRewriter:
    """ASGI middleware that rewrites every HTTP response's headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def rewrite(self, scope: Scope, headers: Headers) -> Headers:
        raise NotImplementedError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def rewritten(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = self.rewrite(scope, list(message.get("headers", [])))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, rewritten)


class SecurityHeaders(_HeaderRewriter):
    """Adds the security headers to every response that lacks them."""

    def rewrite(self, scope: Scope, headers: Headers) -> Headers:
        present = {name.lower() for name, _ in headers}
        return headers + [(name, value) for name, value in SECURITY_HEADERS if name not in present]


class HardenedCsrfCookie(_HeaderRewriter):
    """Gives asgi-csrf's cookie webtier's session cookie attributes:
    HttpOnly (the token travels in forms, never read by script) and Secure,
    but over plain http to this machine in local development."""

    def rewrite(self, scope: Scope, headers: Headers) -> Headers:
        secure = not scope_where(scope).local_development
        hardened = []
        for name, value in headers:
            if name.lower() == b"set-cookie" and value.startswith(CSRF_COOKIE.encode() + b"="):
                value += b"; HttpOnly" + (b"; Secure" if secure else b"")
            hardened.append((name, value))
        return hardened


class TokenFill:
    """Writes the visitor's CSRF token where pages hold the placeholder.

    HTML bodies are buffered (pages are small); the request goes in without
    ``Accept-Encoding`` and ``If-None-Match``, so the page cache answers
    with a plain body to fill, and the filled page carries no ETag of the
    unfilled one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token: Callable[[], str] = scope["csrftoken"]
        dropped = (b"accept-encoding", b"if-none-match")
        inner = {**scope, "headers": [h for h in scope["headers"] if h[0].lower() not in dropped]}
        start: Message | None = None
        chunks: list[bytes] = []

        async def fill(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                if _is_html(message):
                    start = message  # sent with the body, once its length is known
                    return
            elif message["type"] == "http.response.body" and start is not None:
                chunks.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                body = b"".join(chunks)
                if CSRF_PLACEHOLDER.encode() in body:
                    body = body.replace(CSRF_PLACEHOLDER.encode(), token().encode())
                kept = [
                    (k, v)
                    for k, v in start.get("headers", [])
                    if k not in (b"content-length", b"etag")
                ]
                headers = [*kept, (b"content-length", str(len(body)).encode())]
                await send({**start, "headers": headers})
                message = {"type": "http.response.body", "body": body}
            await send(message)

        await self.app(inner, receive, fill)


def _is_html(start: Message) -> bool:
    return any(
        name.lower() == b"content-type" and value.startswith(b"text/html")
        for name, value in start.get("headers", [])
    )


async def _refused(scope: Scope, send: Send, reason: Errors) -> None:
    """asgi-csrf's answer to a POST without the right token: the shop's 403 page."""
    request = Request(scope)
    response = shop_of(request).page(
        request,
        "problem.html",
        Visitor(),
        status=403,
        title="Form expired",
        message="This form was not sent from this shop's page, or it is too old: "
        "go back, reload the page and send it again.",
    )
    await response(scope, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


def csrf_protected(app: ASGIApp, secret: bytes, posts: Iterable[str]) -> Any:
    """``app`` behind asgi-csrf: every POST to ``posts`` needs the form's
    token, even from a client with no cookie (asgi-csrf lets those through
    by default). The signing key is derived from the shop's secret, so the
    session cookie's key never signs anything else."""
    signing = hmac.new(secret, b"webtier shop: csrf", hashlib.sha256).hexdigest()
    return asgi_csrf(
        app,
        signing_secret=signing,
        always_protect=set(posts),
        cookie_samesite="Lax",
        send_csrf_failed=_refused,
    )
