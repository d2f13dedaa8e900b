"""Web framework integrations: ASGI and WSGI middleware.

:class:`ASGIMiddleware` is webtier in one ASGI layer (sessions, the page
cache, access time, hit counters and item views, each optional); each
capability's package (``sessions``, ``pagecache``, ``timing``) holds its
ASGI configuration of that layer and its WSGI, Flask and Django adapters.
"""

from typing import TYPE_CHECKING

from webtier.web._lazy import lazy

if TYPE_CHECKING:
    from webtier.web.asgi import ASGIMiddleware

__all__ = ["ASGIMiddleware"]

# The ASGI layer needs Starlette (webtier[web]): imported on first use.
__getattr__ = lazy(__name__, {"ASGIMiddleware": "webtier.web.asgi"})
