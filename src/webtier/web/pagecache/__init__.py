"""Whole pages from Redis in web apps: one shared policy (``policy``: what
may be stored, what a cached page is answered with, outage logs) and a thin
adapter per kind of app: ``asgi`` (:class:`ASGIMiddleware`: Starlette,
FastAPI), ``wsgi`` (:class:`WSGIMiddleware`), ``flask`` (``install(app,
tier, rules)``). The operations are :mod:`webtier.pagecache.ops`, run by
the tier's transport."""

from typing import TYPE_CHECKING

from webtier.web._lazy import lazy

# Flask is imported by the app, never by this adapter.
from webtier.web.pagecache import flask
from webtier.web.pagecache.wsgi import WSGIMiddleware

if TYPE_CHECKING:
    from webtier.web.pagecache.asgi import ASGIMiddleware

# The ASGI adapter needs Starlette (webtier[web]): imported on first use.
__getattr__ = lazy(__name__, {"ASGIMiddleware": "webtier.web.pagecache.asgi"})

__all__ = ["ASGIMiddleware", "WSGIMiddleware", "flask"]
