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

from webtier._core.extras import extra_needed
from webtier.errors import ConfigError
from webtier.web.sessions.aio import AsyncSession
from webtier.web.sessions.options import SESSION_KEY, SessionOptions

with extra_needed("web", "the ASGI session middleware"):
    # At run time: FastAPI reads request_session's annotation to inject the request.
    from starlette.requests import Request
    from starlette.types import ASGIApp

    from webtier.web.asgi import ASGIMiddleware as Layer

if TYPE_CHECKING:
    from webtier.aio import WebTier as AsyncWebTier


class ASGIMiddleware(Layer):
    """webtier's ASGI layer with sessions alone: each HTTP request gets a
    lazy :class:`AsyncSession` carried by a cookie."""

    def __init__(
        self,
        app: ASGIApp,
        tier: AsyncWebTier,
        *,
        options: SessionOptions | None = None,
        scope_session: bool = False,
        **settings: Any,
    ) -> None:
        options = options or SessionOptions(**settings)
        super().__init__(app, tier, sessions=options, scope_session=scope_session)


def request_session(request: Request) -> AsyncSession:
    """The session of a Starlette request; a FastAPI dependency too:
    ``session: AsyncSession = Depends(request_session)``."""
    session = request.scope.get(SESSION_KEY)
    if not isinstance(session, AsyncSession):
        raise ConfigError("no webtier session: is sessions.ASGIMiddleware around the app?")
    return session
