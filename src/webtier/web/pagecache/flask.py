"""The page cache for Flask apps, over a sync tier::

from webtier.web.pagecache import flask as flask_pagecache

flask_pagecache.install(app, tier, PageRules(...))

Holes (``holes=``) need the visitor's session: webtier's session
middleware around the page cache (install the page cache first, then the
sessions: :func:`webtier.web.sessions.flask.install`), or, for
``flask.session`` on webtier (:class:`webtier.web.sessions.flask.SessionInterface`,
inside the app), its cookie read by the page cache:
``sessions=SessionOptions(cookie_name=app.config["SESSION_COOKIE_NAME"])``.
"""

from __future__ import annotations

from typing import Any

from webtier.pagecache import PageRules
from webtier.pagecache.holes import Holes
from webtier.sync import WebTier
from webtier.web.pagecache.wsgi import WSGIMiddleware
from webtier.web.sessions.options import SessionOptions


def install(
    app: Any,
    tier: WebTier,
    rules: PageRules,
    *,
    holes: Holes | None = None,
    sessions: SessionOptions | None = None,
    item_views: bool = False,
) -> WSGIMiddleware:
    """Wraps the Flask ``app``'s WSGI app in the page cache (``holes``,
    ``sessions`` and ``item_views``: see :class:`WSGIMiddleware`); the
    middleware is returned (``close()`` it at shutdown to flush the
    hit/miss counts)."""
    middleware = WSGIMiddleware(
        app.wsgi_app, tier, rules, holes=holes, sessions=sessions, item_views=item_views
    )
    app.wsgi_app = middleware
    return middleware
