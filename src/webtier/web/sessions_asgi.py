"""Deprecated path: the ASGI session middleware is
:class:`webtier.web.sessions.ASGIMiddleware`."""

from webtier._core.compat import moved

__getattr__ = moved(
    __name__,
    {
        "SessionMiddleware": "webtier.web.sessions:ASGIMiddleware",
        "request_session": "webtier.web.sessions:request_session",
    },
)
