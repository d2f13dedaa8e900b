"""The page cache benchmark's ASGI app, served by uvicorn in a process of its own.

``/page`` renders for 20 ms of CPU (a template's work: it holds the event
loop, as real rendering holds the interpreter) and returns 10 KB of HTML.
Cached through :class:`~webtier.web.pagecache.ASGIMiddleware`;
``/page?_=1`` is the same render, uncached (the book's dynamic mark). Each
response tells how many renders the process has done (``x-renders``).
"""

from __future__ import annotations

import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webtier.aio import WebTier as AsyncWebTier
from webtier.config import Config
from webtier.connect import connect_async
from webtier.pagecache import CacheRoute, PageRules
from webtier.web import pagecache

RENDER_SECONDS = 0.020
BODY = b"".join(b"<tr><td>row %d</td><td>some cell text</td></tr>\n" % i for i in range(220))


def make_app(redis_url: str, prefix: str) -> pagecache.ASGIMiddleware:
    renders = 0

    async def page(request: Request) -> Response:
        nonlocal renders
        renders += 1
        until = time.perf_counter() + RENDER_SECONDS
        while time.perf_counter() < until:
            pass
        return Response(BODY, media_type="text/html", headers={"x-renders": str(renders)})

    app = Starlette(routes=[Route("/page", page), Route("/cold/{n}", page)])
    tier = AsyncWebTier(connect_async(redis_url), Config(prefix=prefix))
    rules = PageRules(routes=(CacheRoute("/page"), CacheRoute("/cold/*")))
    return pagecache.ASGIMiddleware(app, tier, rules)


def serve(redis_url: str, prefix: str, port: int) -> None:
    """Run the app until killed (the target of the bench's server process)."""
    import uvicorn

    uvicorn.run(
        make_app(redis_url, prefix),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
