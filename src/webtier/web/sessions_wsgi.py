"""Deprecated path: the WSGI session middleware is
:class:`webtier.web.sessions.WSGIMiddleware`, Flask's is
:func:`webtier.web.sessions.flask.install`."""

from webtier._core.compat import moved

__getattr__ = moved(
    __name__,
    {
        "WSGISessionMiddleware": "webtier.web.sessions:WSGIMiddleware",
        "session_of": "webtier.web.sessions:session_of",
        "where": "webtier.web.sessions.wsgi:where",
        "UNAVAILABLE_STATUS": "webtier.web.sessions.wsgi:UNAVAILABLE_STATUS",
        "sessions_for_flask": "webtier.web.sessions.flask:install",
        "current_session": "webtier.web.sessions.flask:current_session",
    },
)
