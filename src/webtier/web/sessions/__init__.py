"""Login sessions and carts in web apps, behind a cookie: one shared core
and a thin adapter per kind of app.

- ``options``: :class:`SessionOptions`, the middlewares' settings;
- ``cookie``: the cookie's value (HMAC-signed) and attributes;
- ``outage``: the throttled log and the 503 while Redis is away;
- ``state``: one request's view of its session;
- ``flows``: the session's logic, as operations the tier's transport runs;
- ``aio``: :class:`AsyncSession`, what handlers get on an asyncio tier;
  ``sync``: :class:`Session`, its sync twin, generated from ``aio``;
- ``adapter``: what the middlewares share;
- ``asgi``: :class:`ASGIMiddleware` (Starlette, FastAPI; ``request.session``
  too with ``scope_session=True``), ``wsgi``: :class:`WSGIMiddleware`,
  ``flask``: ``install(app, tier)``, ``django``: ``Middleware``;
- the frameworks' own session interfaces on ``tier.session_store``:
  ``flask.SessionInterface`` (``flask_interface``), ``django.SessionStore``
  (``django_store``: ``SESSION_ENGINE = "webtier.web.sessions.django"``),
  ``starsessions.Store``.
"""

from typing import TYPE_CHECKING

from webtier.errors import LateCookie
from webtier.web._lazy import lazy

# The framework adapters import their framework only when called.
from webtier.web.sessions import django, flask
from webtier.web.sessions.aio import AsyncSession
from webtier.web.sessions.options import SESSION_KEY, SessionOptions
from webtier.web.sessions.sync import Session
from webtier.web.sessions.wsgi import WSGIMiddleware, session_of

if TYPE_CHECKING:
    from webtier.web.sessions.asgi import ASGIMiddleware, request_session

# The ASGI adapter needs Starlette (webtier[web]): imported on first use.
__getattr__ = lazy(
    __name__,
    {
        "ASGIMiddleware": "webtier.web.sessions.asgi",
        "request_session": "webtier.web.sessions.asgi",
    },
)

__all__ = [
    "SESSION_KEY",
    "ASGIMiddleware",
    "AsyncSession",
    "LateCookie",
    "Session",
    "SessionOptions",
    "WSGIMiddleware",
    "django",
    "flask",
    "request_session",
    "session_of",
]
