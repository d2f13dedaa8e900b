"""The dashboard (``webtier[dashboard]``): charts of the counters, the
statistics, the slowest pages, the view ranking, the page cache, sessions,
rows and workers, live, as a Starlette app any ASGI app can mount::

    app.mount("/dashboard", dashboard(tier, credentials=Credentials(token=...)))

It also serves ``/metrics`` (see :mod:`webtier.metrics`). Pages are plain
HTML; the charts are uPlot's, served from the package (no CDN), driven by a
small script of our own: the Content-Security-Policy allows no inline script.
It is read-only unless ``allow_actions=True``, which adds purging cached
pages, behind a CSRF check (starlette-csrf's double-submit cookie, under a
name of its own: :mod:`.csrf`).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from importlib import resources

from webtier._core.extras import extra_needed
from webtier.aio import WebTier
from webtier.metrics import MetricsApp, Settings
from webtier.pagecache import PageRules

with extra_needed("dashboard", "the dashboard"):
    from jinja2 import Environment, FileSystemLoader, select_autoescape
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

from webtier.web.dashboard import actions, api
from webtier.web.dashboard.access import AccessMiddleware, Credentials, HostCheck, check_bind

__all__ = ["Credentials", "HostCheck", "check_bind", "dashboard"]

# No inline script or style anywhere: the page's own code is a static file.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_HERE = resources.files(__name__)


class _SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", ()),
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                ]
            await send(message)

        await self.app(scope, receive, sending)


def dashboard(
    tier: WebTier,
    *,
    credentials: Credentials | None = None,
    allow_actions: bool = False,
    rules: PageRules | None = None,
    metrics: Settings | None = None,
    allowed_hosts: Sequence[str] = (),
) -> Starlette:
    """The dashboard of ``tier`` as an ASGI app. ``credentials`` (a token or
    HTTP basic) guard every route, ``/metrics`` included; without them it is
    open, so bind it to loopback only (the CLI refuses otherwise): it then
    answers only requests whose ``Host`` is ``localhost``, a loopback
    address or one of ``allowed_hosts`` (:class:`HostCheck`), and 400 to others.
    ``allow_actions`` adds the purge buttons (CSRF-protected); ``rules`` are
    the page cache's rules, to find a page from its URL (default: the book's)."""
    credentials = credentials or Credentials()
    templates = Environment(
        loader=FileSystemLoader(str(_HERE / "templates")),
        autoescape=select_autoescape(default=True),
    )
    page = templates.get_template("dashboard.html")

    async def index(request: Request) -> Response:
        html = page.render(request=request, allow_actions=allow_actions)
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    routes = [
        Route("/", index, name="index"),
        Route("/api/settings", api.endpoint(api.settings, tier)),
        Route("/api/counters", api.endpoint(api.counters, tier)),
        Route("/api/series", api.endpoint(api.series, tier)),
        Route("/api/stats", api.endpoint(api.statistics, tier)),
        Route("/api/stats/{context:path}", api.endpoint(api.context, tier)),
        Route("/api/health", api.endpoint(api.health, tier)),
        Route("/metrics", MetricsApp(tier, metrics)),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    middleware = [Middleware(_SecurityHeaders), Middleware(AccessMiddleware, credentials)]
    if not credentials.required:
        middleware.insert(0, Middleware(HostCheck, allowed=allowed_hosts))
    if allow_actions:
        routes.append(
            Route(
                "/api/actions/purge",
                api.endpoint(actions.purge(rules), tier, lag_tolerated=False),
                methods=["POST"],
            )
        )
        with extra_needed("dashboard", "the dashboard's actions"):
            from webtier.web.dashboard.csrf import DashboardCsrf

        # A secret per app: the CSRF cookie is signed, and a restart's
        # cookie is replaced at the page's next poll.
        middleware.append(Middleware(DashboardCsrf, secret=secrets.token_urlsafe(32)))
    return Starlette(routes=routes, middleware=middleware)
