"""The page cache for Flask apps, over a sync tier::

from webtier.web.pagecache import flask as flask_pagecache

flask_pagecache.install(app, tier, PageRules(...))

Holes (``holes=``) need webtier's session middleware around the page
cache: install the page cache first, then the sessions
(:func:`webtier.web.sessions.flask.install`).
"""

from __future__ import annotations

from typing import Any

from webtier.pagecache import PageRules
from webtier.pagecache.holes import Holes
from webtier.sync import WebTier
from webtier.web.pagecache.wsgi import WSGIMiddleware


def install(
    app: Any,
    tier: WebTier,
    rules: PageRules,
    *,
    holes: Holes | None = None,
    item_views: bool = False,
) -> WSGIMiddleware:
    """Wraps the Flask ``app``'s WSGI app in the page cache (``holes`` and
    ``item_views``: see :class:`WSGIMiddleware`); the middleware is
    returned (``close()`` it at shutdown to flush the hit/miss counts)."""
    middleware = WSGIMiddleware(app.wsgi_app, tier, rules, holes=holes, item_views=item_views)
    app.wsgi_app = middleware
    return middleware
