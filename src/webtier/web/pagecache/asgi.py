"""Page cache ASGI middleware (Starlette, FastAPI, any ASGI app).

::

    from webtier.web import pagecache

    app.add_middleware(pagecache.ASGIMiddleware, tier=async_tier, rules=PageRules(
        routes=(CacheRoute("/", vary=("accept-language",)),)))

Put it outermost (before compression middleware: it compresses what it
stores itself). Requests the rules leave alone go straight to the app. Others
are answered from Redis (``X-Cache: HIT`` or ``STALE``), or rendered once
across every process and stored when the response allows it (``MISS``).
Responses that are not stored (and streamed ones) go through untouched but
for ``X-Cache: MISS``. Concurrent requests for one page in one process share
the page the first one gets (across processes, a lock in Redis does it).
When Redis is unavailable the app renders every request and the outage is
logged once per interval. HEAD requests are left to the app.
"""

from __future__ import annotations

from webtier._core.extras import extra_needed
from webtier.aio import WebTier as AsyncWebTier
from webtier.pagecache import PageRules

with extra_needed("web", "the ASGI page cache"):
    from starlette.types import ASGIApp

    from webtier.web.asgi import ASGIMiddleware as Layer


class ASGIMiddleware(Layer):
    """webtier's ASGI layer with the page cache alone: answers cacheable
    requests from the page cache."""

    def __init__(self, app: ASGIApp, tier: AsyncWebTier, rules: PageRules) -> None:
        super().__init__(app, tier, pages=rules)
