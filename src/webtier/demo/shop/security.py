"""The shop's defences, in one ASGI layer: CSRF tokens bound to the
visitor, and security headers on every response.

Every POST to a form route carries a ``csrftoken`` field that
:class:`Defences` checks against a synchronizer token derived (HMAC) from
what identifies the visitor: the session token of their signed session
cookie, or, before they have a session, a random visitor id in a
``webtier_csrf`` cookie. An attacker who plants a cookie of their own (a
sibling subdomain or another port of the host can) gets a token bound to
*their* id, which the victim's session does not match. The guard never
skips the check (not for an ``Authorization`` header either: the shop has
no client without cookies), and reads the form itself: a body that is not
an URL-encoded UTF-8 form is refused with a 4xx, never a 500.

Pages are rendered with a placeholder where the token goes and the guard
writes the visitor's token in as the page leaves, outside the page cache:
a cached item page holds no one's token, and each visitor's copy holds
their own.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from http.cookies import Morsel
from typing import Any, Protocol
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from webtier.demo.shop.context import CSRF_PLACEHOLDER, Visitor
from webtier.web.sessions import SessionOptions
from webtier.web.sessions.adapter import header_values
from webtier.web.sessions.cookie import decode
from webtier.web.sessions.part import scope_where

# The visitor id of a visitor with no session yet (a cookie of its own
# name: another app's ``csrftoken`` on the same host never collides).
CSRF_COOKIE = "webtier_csrf"
CSRF_FIELD = "csrftoken"
MAX_FORM_BYTES = 16 * 1024  # the shop's forms hold a few short fields
MAX_FORM_FIELDS = 20
_VISITOR_ID = re.compile(r"[A-Za-z0-9_-]{22,64}")

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
_PLACEHOLDER = CSRF_PLACEHOLDER.encode()


class Pages(Protocol):
    """What renders the shop's pages (the refusal of a form is one)."""

    def page(
        self, request: Request, template: str, visitor: Visitor, *, status: int = 200, **data: Any
    ) -> Response: ...


def cookie_value(header: str | None, name: str) -> str | None:
    """The first ``name`` cookie of a ``Cookie`` header, by hand: whatever
    other cookies hold (``user[id]``, ``@``, bytes that are not UTF-8), no
    cookie shadows another, and nothing raises."""
    for pair in (header or "").split(";"):
        key, sep, value = pair.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    return None


class Defences:
    """Refuses a POST to ``posts`` without the visitor's token (403), or
    whose body is not a small URL-encoded UTF-8 form (413, 415, 400); fills
    every HTML page's placeholder with the visitor's token, giving a
    visitor with neither session nor visitor id one; adds the security
    headers to every response that lacks them. ``pages`` renders the
    refusals. Plain ASGI, meant to sit in front of the app (outside
    Starlette's own layers): it needs nothing Starlette puts in the scope.

    HTML bodies are buffered (pages are small); the request goes in without
    ``Accept-Encoding`` and ``If-None-Match``, so the page cache answers
    with a plain body to fill, and the filled page carries no ETag of the
    unfilled one."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        secret: bytes,
        session: SessionOptions,
        posts: Iterable[str],
        pages: Pages,
    ) -> None:
        self.app, self.session, self.posts, self.pages = app, session, frozenset(posts), pages
        # A key of its own, so the session cookie's key never signs anything else.
        self.key = hmac.new(secret, b"webtier shop: csrf", hashlib.sha256).digest()
        # Every page of a visitor carries the same token: made once.
        self.token = functools.lru_cache(maxsize=4096)(self._token)

    def _token(self, binding: str) -> str:
        """The token of forms for the visitor ``binding`` names."""
        digest = hmac.new(self.key, binding.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def binding(self, cookie_header: str | None) -> str | None:
        """What the visitor's tokens are bound to: their session if their
        cookie carries a valid one (then only that), else their visitor id."""
        session = decode(self.session, cookie_header).token
        if session is not None:
            return f"session\0{session}"
        visitor = cookie_value(cookie_header, CSRF_COOKIE)
        if visitor is not None and _VISITOR_ID.fullmatch(visitor):
            return f"visitor\0{visitor}"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        binding = self.binding(header_values(scope.get("headers", []), b"cookie"))
        if scope["method"] == "POST" and scope["path"] in self.posts:
            body, refusal = await self._checked_form(scope, receive, binding)
            if refusal is not None:
                status, title, message = refusal
                # No session read: the visitor is shown as anonymous, at no Redis call.
                response = self.pages.page(
                    Request(scope), "problem.html", Visitor(), status=status, title=title,
                    message=message,
                )  # fmt: skip
                await response(scope, _no_receive, self._filling(scope, send, binding))
                return
            receive = _replaying(body, receive)
        dropped = (b"accept-encoding", b"if-none-match")
        inner = {**scope, "headers": [h for h in scope["headers"] if h[0].lower() not in dropped]}
        await self.app(inner, receive, self._filling(scope, send, binding))

    async def _checked_form(
        self, scope: Scope, receive: Receive, binding: str | None
    ) -> tuple[bytes, tuple[int, str, str] | None]:
        """The request's body, and why it is refused (status, title, message) or None."""
        media = (header_values(scope["headers"], b"content-type") or "").partition(";")[0]
        if media.strip().lower() != "application/x-www-form-urlencoded":
            return b"", (415, "Not a form", "The shop's forms send URL-encoded fields only.")
        body = await _body(receive, MAX_FORM_BYTES)
        if body is None:
            return b"", (413, "Form too large", "This form holds more than the shop's forms do.")
        try:
            fields = parse_qsl(
                body.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS
            )
        except (UnicodeDecodeError, ValueError):
            return b"", (400, "Unreadable form", "This form's fields could not be read.")
        given = next((value for name, value in fields if name == CSRF_FIELD), "")
        expected = self.token(binding) if binding is not None else ""
        # Bytes: compare_digest refuses str with non-ASCII characters.
        if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
            return body, (
                403,
                "Form expired",
                "This form was not sent from this shop's page, or it is too old: "
                "go back, reload the page and send it again.",
            )
        return body, None

    def _filling(self, scope: Scope, send: Send, binding: str | None) -> Send:
        start: Message | None = None
        chunks: list[bytes] = []

        async def fill(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                message = _secured(message)
                if _is_html(message):
                    start = message  # sent with the body, once its length is known
                    return
            elif message["type"] == "http.response.body" and start is not None:
                chunks.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                body = b"".join(chunks)
                headers = [
                    (k, v)
                    for k, v in start.get("headers", [])
                    if k.lower() not in (b"content-length", b"etag")
                ]
                if _PLACEHOLDER in body:
                    token, cookie = self._page_token(scope, headers, binding)
                    body = body.replace(_PLACEHOLDER, token.encode())
                    if cookie is not None:
                        headers.append((b"set-cookie", cookie.OutputString().encode()))
                    # A page holding one visitor's token never sits in a shared cache.
                    headers = [(k, v) for k, v in headers if k.lower() != b"cache-control"]
                    headers.append((b"cache-control", b"no-store"))
                headers.append((b"content-length", str(len(body)).encode()))
                await send({**start, "headers": headers})
                message = {"type": "http.response.body", "body": body}
            await send(message)

        return fill

    def _page_token(
        self, scope: Scope, headers: Headers, binding: str | None
    ) -> tuple[str, Morsel[str] | None]:
        """The token a page's forms carry, and the visitor id cookie to set
        if the visitor needs one. A session the response sets (a first
        cart line, a login) or ends (a logout) binds the page's forms."""
        prefix = self.session.cookie_name.encode() + b"="
        for name, value in headers:
            if name.lower() == b"set-cookie" and value.startswith(prefix):
                pair = value.partition(b";")[0].decode("latin-1")
                session = decode(self.session, pair).token
                binding = f"session\0{session}" if session is not None else None
        if binding is None:
            cookie_header = header_values(scope.get("headers", []), b"cookie")
            visitor = cookie_value(cookie_header, CSRF_COOKIE)
            if visitor is not None and _VISITOR_ID.fullmatch(visitor):
                return self.token(f"visitor\0{visitor}"), None
            visitor = secrets.token_urlsafe(32)
            # (A new visitor's first token: not kept, most never come back.)
            return self._token(f"visitor\0{visitor}"), self._visitor_cookie(scope, visitor)
        return self.token(binding), None

    def _visitor_cookie(self, scope: Scope, visitor: str) -> Morsel[str]:
        """The visitor id's cookie, with the session cookie's attributes:
        HttpOnly (the token travels in forms, never read by script) and
        Secure, but over plain http to this machine in local development."""
        morsel: Morsel[str] = Morsel()
        morsel.set(CSRF_COOKIE, visitor, visitor)
        morsel["path"] = "/"
        morsel["httponly"] = True
        morsel["samesite"] = "Lax"
        if not scope_where(scope).local_development:
            morsel["secure"] = True
        return morsel


async def _body(receive: Receive, limit: int) -> bytes | None:
    """The request's body, or None past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client left: the app sees what came
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read already, then the client's."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _secured(start: Message) -> Message:
    """``start`` with the security headers it lacks."""
    headers: Headers = list(start.get("headers", []))
    present = {name.lower() for name, _ in headers}
    added = [(name, value) for name, value in SECURITY_HEADERS if name not in present]
    return {**start, "headers": headers + added}


def _is_html(start: Message) -> bool:
    return any(
        name.lower() == b"content-type" and value.startswith(b"text/html")
        for name, value in start.get("headers", [])
    )


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}
