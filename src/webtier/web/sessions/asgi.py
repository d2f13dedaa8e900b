"""Session middleware for ASGI apps (Starlette, FastAPI, any ASGI app), over
an asyncio tier.

Starlette and FastAPI::

    from webtier.web import sessions

    app.add_middleware(sessions.ASGIMiddleware, tier=async_tier, signing_keys=[key])

    async def item(request):
        session = request.state.session            # an AsyncSession
        # FastAPI: session: AsyncSession = Depends(sessions.request_session)
        await session.record_view(request.path_params["id"])
        user = await session.user()

With ``scope_session=True`` the session's data is also Starlette's
``request.session`` (``scope["session"]``, a dict, as Starlette's own
SessionMiddleware gives it, so authlib, starlette-admin and the like use
webtier): it is loaded before the app runs when the request has a session
cookie (one round trip), and the keys the request changed or removed are
saved before the response starts, creating the session (and its cookie) on
the first write; its cart and viewed items are the same session's.

Any ASGI app finds the session in ``scope["webtier.session"]``. Options are
the fields of :class:`~webtier.web.sessions.SessionOptions` (or pass
``options=``). When the handler needs the session and Redis is unreachable,
the middleware answers 503 (or serves the visitor as anonymous, with
``on_outage="anonymous"``); the error never reaches an exception page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webtier._core.deadline import time_limit
from webtier._core.extras import extra_needed
from webtier.errors import ConfigError, RedisUnavailable
from webtier.sessions import store
from webtier.web.sessions.adapter import Adapter, header_values, merge_headers
from webtier.web.sessions.aio import AsyncSession
from webtier.web.sessions.cookie import Where, came_through_proxy
from webtier.web.sessions.options import SESSION_KEY, SessionOptions
from webtier.web.sessions.outage import UNAVAILABLE_BODY

with extra_needed("web", "the ASGI session middleware"):
    # At run time: FastAPI reads request_session's annotation to inject the request.
    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from webtier.aio import WebTier as AsyncWebTier


class ASGIMiddleware(Adapter["AsyncWebTier"]):
    """Gives each HTTP request a lazy :class:`AsyncSession` carried by a cookie."""

    def __init__(
        self,
        app: ASGIApp,
        tier: AsyncWebTier,
        *,
        options: SessionOptions | None = None,
        scope_session: bool = False,
        **settings: Any,
    ) -> None:
        super().__init__(tier, options, settings)
        self.app = app
        self.scope_session = scope_session

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", [])
        state = self.state(header_values(headers, b"cookie"))
        session = AsyncSession(self.tier, state)
        scope[SESSION_KEY] = session
        scope.setdefault("state", {})["session"] = session  # request.state.session
        where = scope_where(scope)
        started = False
        saved: dict[str, str] = {}  # scope["session"] as loaded, each key's JSON

        async def send_with_cookie(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                if self.scope_session:
                    await _save_scope_session(session, scope["session"], saved)
                started = True
                extra = state.response_headers(where)
                if extra:
                    message = {**message, "headers": _merged(message.get("headers", []), extra)}
            await send(message)

        try:
            with time_limit(self.options.time_limit):
                if self.scope_session:
                    scope["session"] = await session.data() if state.token else {}
                    saved = store.encoded(scope["session"])
                await self.app(scope, receive, send_with_cookie)
        except RedisUnavailable as error:
            if started:
                raise  # too late for a 503: the server closes the connection
            headers = _merged([], self.unavailable(error))
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": UNAVAILABLE_BODY})


async def _save_scope_session(
    session: AsyncSession, data: dict[str, Any], saved: dict[str, str]
) -> None:
    """Writes the keys of ``scope["session"]`` the request changed or removed."""
    changed, removed = store.changes(saved, data)
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


def request_session(request: Request) -> AsyncSession:
    """The session of a Starlette request; a FastAPI dependency too:
    ``session: AsyncSession = Depends(request_session)``."""
    session = request.scope.get(SESSION_KEY)
    if not isinstance(session, AsyncSession):
        raise ConfigError("no webtier session: is sessions.ASGIMiddleware around the app?")
    return session


def _merged(raw: Any, extra: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    existing = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw]
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in merge_headers(existing, extra)]
