"""The page cache for Flask apps, over a sync tier::

from webtier.web.pagecache import flask as flask_pagecache

flask_pagecache.install(app, tier, PageRules(...))
"""

from __future__ import annotations

from typing import Any

from webtier.pagecache import PageRules
from webtier.sync import WebTier
from webtier.web.pagecache.wsgi import WSGIMiddleware


def install(app: Any, tier: WebTier, rules: PageRules) -> WSGIMiddleware:
    """Wraps the Flask ``app``'s WSGI app in the page cache; the middleware
    is returned (``close()`` it at shutdown to flush the hit/miss counts)."""
    middleware = WSGIMiddleware(app.wsgi_app, tier, rules)
    app.wsgi_app = middleware
    return middleware
