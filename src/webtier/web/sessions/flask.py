"""Sessions for Flask apps, over a sync tier.

``flask.session`` (and flask-login, authlib...) kept in webtier::

    app.session_interface = webtier.web.sessions.flask.SessionInterface(tier)

(:class:`~webtier.web.sessions.flask_interface.SessionInterface`: the data
JSON by key, a response saves only what its request changed; call
``app.session_interface.regenerate(flask.session)`` at login.)

webtier's own session middleware (its cookie, carts and viewed items)::

    from webtier.web.sessions import flask as flask_sessions

    flask_sessions.install(app, tier, signing_keys=[key])

    @app.get("/item/<id>")
    def item(id):
        session = flask_sessions.current_session()   # a Session
        session.record_view(id)
        return render(user=session.user())

The WSGI middleware wraps ``app.wsgi_app``; Flask turns exceptions into 500
pages itself, so an error handler answers the 503 when a view needs the
session while Redis is unreachable.
"""

from __future__ import annotations

from typing import Any

from webtier.errors import RedisUnavailable
from webtier.sync import WebTier
from webtier.web._lazy import lazy
from webtier.web.sessions.sync import Session
from webtier.web.sessions.wsgi import WSGIMiddleware, session_of


def install(app: Any, tier: WebTier, **settings: Any) -> WSGIMiddleware:
    """Wraps the Flask ``app`` in the session middleware, and answers 503
    (instead of Flask's 500 page) when a view needs the session while Redis
    is unreachable. Views get the session with :func:`current_session`."""
    middleware = WSGIMiddleware(app.wsgi_app, tier, **settings)
    app.wsgi_app = middleware
    app.register_error_handler(RedisUnavailable, middleware.flask_unavailable)
    return middleware


def current_session() -> Session:
    """The session of the Flask request being handled."""
    import flask  # the app's dependency, not webtier's

    return session_of(flask.request.environ)


# Its base class is Flask's: imported on first use, so this module imports no Flask.
__getattr__ = lazy(__name__, {"SessionInterface": "webtier.web.sessions.flask_interface"})
