"""Session middleware for WSGI apps, over a sync tier (Flask:
:mod:`webtier.web.sessions.flask`).

Wrap the app, ``sessions.WSGIMiddleware(app, tier, ...)``, and find the
session in ``environ["webtier.session"]`` (or ``sessions.session_of(environ)``).
Options are the fields of :class:`~webtier.web.sessions.SessionOptions` (or
pass ``options=``).

When the handler needs the session and Redis is unreachable the request is
answered 503 (or served as anonymous with ``on_outage="anonymous"``): the
middleware turns a ``RedisUnavailable`` raised by the app into the 503.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias

from webtier._core.deadline import time_limit
from webtier.errors import ConfigError, RedisUnavailable
from webtier.sync import WebTier
from webtier.web.sessions.adapter import Adapter, environ_headers, merge_headers
from webtier.web.sessions.cookie import Where, came_through_proxy
from webtier.web.sessions.options import SESSION_KEY, SessionOptions
from webtier.web.sessions.outage import UNAVAILABLE_BODY
from webtier.web.sessions.sync import Session

Environ: TypeAlias = dict[str, Any]
StartResponse: TypeAlias = Callable[..., Any]
Headers: TypeAlias = list[tuple[str, str]]
WSGIApp: TypeAlias = Callable[[Environ, StartResponse], Iterable[bytes]]

UNAVAILABLE_STATUS = "503 Service Unavailable"


def where(environ: Environ) -> Where:
    """What the cookie's attributes depend on, from a WSGI environ."""
    return Where(
        mount=environ.get("SCRIPT_NAME", ""),
        scheme=environ.get("wsgi.url_scheme", "http"),
        host=environ.get("HTTP_HOST") or environ.get("SERVER_NAME", ""),
        peer=environ.get("REMOTE_ADDR", ""),
        proxied=came_through_proxy(environ_headers(environ)),
    )


class WSGIMiddleware(Adapter[WebTier]):
    """Gives each request a lazy :class:`Session` carried by a cookie."""

    def __init__(
        self,
        app: WSGIApp,
        tier: WebTier,
        *,
        options: SessionOptions | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(tier, options, settings)
        self.app = app

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        state = self.state(environ.get("HTTP_COOKIE"))
        environ[SESSION_KEY] = Session(self.tier, state)

        def start_with_cookie(status: str, headers: Headers, exc_info: Any = None) -> Any:
            extra = state.response_headers(lambda: where(environ))
            return start_response(status, merge_headers(headers, extra), exc_info)

        try:
            with time_limit(self.options.time_limit):
                return self.app(environ, start_with_cookie)
        except RedisUnavailable as error:
            # Nothing was sent yet (the app raised before returning its body),
            # so the 503 may replace a response the app had started.
            start_response(UNAVAILABLE_STATUS, self.unavailable(error), sys.exc_info())
            return [UNAVAILABLE_BODY]

    def flask_unavailable(self, error: RedisUnavailable) -> tuple[bytes, int, Headers]:
        """The 503 as a Flask error handler returns it."""
        return UNAVAILABLE_BODY, 503, self.unavailable(error)


def session_of(environ: Environ) -> Session:
    """The session the middleware gave this request."""
    session = environ.get(SESSION_KEY)
    if not isinstance(session, Session):
        raise ConfigError("no webtier session: is sessions.WSGIMiddleware around the app?")
    return session
