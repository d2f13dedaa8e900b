"""Deprecated path: the page cache's ASGI middleware is
:class:`webtier.web.pagecache.ASGIMiddleware`."""

from webtier._core.compat import moved

__getattr__ = moved(
    __name__,
    {
        "PageCacheMiddleware": "webtier.web.pagecache:ASGIMiddleware",
        "scope_request": "webtier.web.pagecache.asgi:scope_request",
    },
)
