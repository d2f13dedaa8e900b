"""Deprecated path: the page cache's WSGI middleware is
:class:`webtier.web.pagecache.WSGIMiddleware`."""

from webtier._core.compat import moved

__getattr__ = moved(
    __name__,
    {
        "WSGIPageCache": "webtier.web.pagecache:WSGIMiddleware",
        "environ_request": "webtier.web.pagecache.wsgi:environ_request",
    },
)
