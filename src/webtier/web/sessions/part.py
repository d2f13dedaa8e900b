"""The session part of webtier's ASGI layer (:mod:`webtier.web.asgi`): the
cookie read into a lazy session, ``scope["session"]`` loaded and saved
around the app, the session's headers on the response, and the 503 when
the app needed Redis and it is away."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webtier._core.deadline import time_limit
from webtier._core.extras import extra_needed
from webtier.errors import RedisUnavailable
from webtier.sessions import ops, store
from webtier.web.sessions.adapter import Adapter, header_values, merge_headers
from webtier.web.sessions.aio import AsyncSession
from webtier.web.sessions.cookie import Where, came_through_proxy
from webtier.web.sessions.options import SESSION_KEY, SessionOptions
from webtier.web.sessions.outage import UNAVAILABLE_BODY
from webtier.web.sessions.state import SessionState

with extra_needed("web", "the ASGI session middleware"):
    from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from webtier.aio import WebTier as AsyncWebTier


class Sessions(Adapter["AsyncWebTier"]):
    """The session part of webtier's ASGI layer (:mod:`webtier.web.asgi`)."""

    def __init__(self, tier: AsyncWebTier, options: SessionOptions, scope_session: bool) -> None:
        super().__init__(tier, options, {})
        self.scope_session = scope_session

    def begin(self, scope: Scope) -> SessionRequest:
        """The request's session, lazy (no I/O), in the scope."""
        state = self.state(header_values(scope.get("headers", []), b"cookie"))
        session = AsyncSession(self.tier, state)
        scope[SESSION_KEY] = session
        scope.setdefault("state", {})["session"] = session  # request.state.session
        return SessionRequest(self, scope, state, session)

    async def answer_unavailable(self, error: RedisUnavailable, send: Send) -> None:
        """The 503 of a request whose handler needed the session."""
        headers = _merged([], self.unavailable(error))
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": UNAVAILABLE_BODY})


class SessionRequest:
    """One request's session in the ASGI layer: loaded around the app when
    the app reads ``scope["session"]``, its changes saved and its cookie
    set as the response starts."""

    __slots__ = ("part", "saved", "scope", "session", "state")

    def __init__(
        self, part: Sessions, scope: Scope, state: SessionState, session: AsyncSession
    ) -> None:
        self.part, self.scope, self.state, self.session = part, scope, state, session
        self.saved: dict[str, str] | None = None  # scope["session"] as loaded, each key's JSON

    async def run(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        with time_limit(self.part.options.time_limit):
            if self.part.scope_session:
                scope["session"] = await self.session.data() if self.state.token else {}
                # The data's JSON as loaded (none when anonymous): not encoded again.
                self.saved = ops.json_of(self.state.fields) if self.state.fields else {}
            await app(scope, receive, send)

    async def finish(self, headers: list[tuple[bytes, bytes]]) -> None:
        """Saves what the app changed in ``scope["session"]``; adds the
        session's headers (its cookie, ``Vary``) to the response's."""
        if self.saved is not None:
            await _save_scope_session(self.session, self.scope["session"], self.saved)
        extra = self.state.response_headers(lambda: scope_where(self.scope))
        if extra:
            headers[:] = _merged(headers, extra)


async def _save_scope_session(
    session: AsyncSession, data: dict[str, Any], saved: dict[str, str]
) -> None:
    """Writes the keys of ``scope["session"]`` the request changed or removed."""
    changed, removed, _ = store.changes(saved, data)
    if changed:
        await session.update(changed)
    if removed:
        await session.discard(*removed)


def scope_where(scope: Scope) -> Where:
    """What a cookie's attributes depend on in an ASGI request."""
    headers = scope.get("headers", [])
    return Where(
        mount=scope.get("root_path", ""),
        scheme=scope.get("scheme", "http"),
        host=header_values(headers, b"host") or "",
        peer=(scope.get("client") or ("",))[0],
        proxied=came_through_proxy(key.decode("latin-1") for key, _ in headers),
    )


def _merged(raw: Any, extra: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    existing = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw]
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in merge_headers(existing, extra)]
