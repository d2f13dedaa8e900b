"""Deprecated path: the session objects live in :mod:`webtier.web.sessions`."""

from webtier._core.compat import moved

__getattr__ = moved(
    __name__,
    {
        "Session": "webtier.web.sessions:Session",
        "AsyncSession": "webtier.web.sessions:AsyncSession",
        "SessionOptions": "webtier.web.sessions:SessionOptions",
        "SESSION_KEY": "webtier.web.sessions:SESSION_KEY",
        "LateCookie": "webtier.errors:LateCookie",
    },
)
