"""The shop as one Starlette app: :func:`create_app`.

Every request goes through two layers, plain ASGI in front of Starlette,
before the routes:

1. the shop's ``Defences`` (security.py): every form's token checked, bound
   to the visitor's session, and written into each visitor's pages; the
   security headers (CSP without inline script, nosniff, referrer policy,
   frame-ancestors);
2. webtier's one ASGI layer (:class:`webtier.web.ASGIMiddleware`): the page
   cache answering anonymous item pages of the top 10,000 items before
   anything else runs; the cookie, the session and its cart; each
   request's time as the ``AccessTime`` of its route template (``webtier
   stats slowest``); hits per route template (batched counters); anonymous
   item views (the ranking).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator

from webtier._core.extras import extra_needed
from webtier.aio import WebTier as AsyncWebTier
from webtier.config import ANALYTICS_COOKIES
from webtier.demo.shop.settings import SESSION_COOKIE, ShopSettings
from webtier.errors import DatabaseUnavailable, RedisUnavailable, SourceError
from webtier.pagecache import CacheRoute, PageRules

# The shop's modules import what the ``shop`` extra brings (Starlette,
# Jinja2, SQLAlchemy...): without it, one line naming the extra.
with extra_needed("shop", "the demo shop"):
    import sqlalchemy as sa
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import RedirectResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.types import ASGIApp, Receive, Scope, Send

    from webtier.demo import shopdb
    from webtier.demo.shop import accounts, orders, pages
    from webtier.demo.shop.context import NOTICES, Shop
    from webtier.demo.shop.jobs import jobs_config, maintenance, schedule_flash_sale
    from webtier.demo.shop.security import CSRF_COOKIE, Defences
    from webtier.rows.sql import open_engine
    from webtier.web import ASGIMiddleware, sessions

POSTS = ("/cart", "/login", "/logout", "/checkout", "/account/logout-everywhere")
HITS = "hits:"  # counter names: hits:<route template>, and hits:all


# The CSRF cookie never changes a page (its token is written in outside the
# cache); analytics cookies as usual.
HARMLESS_COOKIES = (*sorted(ANALYTICS_COOKIES), CSRF_COOKIE)
HOME_TTL = 2.0  # seconds an anonymous visitor's home page may be behind the ranking
# Seconds the flash sale's page is kept: its rows are refreshed every second
# (ShopSettings.flash_refresh), so its stock stays about that old.
FLASH_SALE_TTL = 0.5

PAGE_RULES = PageRules(
    routes=(
        # The book's item rule on the shop's item paths: ``/item/42`` is the
        # page of item 42, as ``?item=42`` is in the book (its key lies with
        # the item's, so checkout drops every page of an item at once).
        CacheRoute(
            "/item/*",
            item_pages=True,
            item_in_path=True,
            holes=True,
            ignored_cookies=HARMLESS_COOKIES,
        ),
        # Further than the book: every visit starts at the home page, the
        # same for every visitor (the most viewed items) but for their name,
        # cart and recently viewed items (holes).
        # A notice waiting in the visitor's session (a cart merged at login,
        # an order placed) is shown once, by a render of their own.
        CacheRoute(
            "/",
            ttl=HOME_TTL,
            holes=True,
            ignored_cookies=HARMLESS_COOKIES,
            render_for=lambda visit: bool(visit.data.get(NOTICES)),
        ),
        CacheRoute("/flash-sale", ttl=FLASH_SALE_TTL, holes=True, ignored_cookies=HARMLESS_COOKIES),
    )
)


def routes(shop: Shop) -> list[Route | Mount]:
    return [
        Route("/", pages.home, name="home"),
        Route("/item/{item_id}", pages.item, name="item"),
        Route("/cart", orders.cart, name="cart"),
        Route("/cart", orders.change_cart, methods=["POST"]),
        Route("/checkout", orders.checkout, methods=["POST"]),
        Route("/orders/{order_id}", orders.order, name="order"),
        Route("/login", accounts.login_form, name="login"),
        Route("/login", accounts.login, methods=["POST"]),
        Route("/logout", accounts.logout, methods=["POST"]),
        Route("/account", accounts.account, name="account"),
        Route("/account/logout-everywhere", accounts.logout_everywhere, methods=["POST"]),
        Route("/flash-sale", pages.flash_sale, name="flash_sale"),
        Route("/healthz", pages.healthz),
        Route("/readyz", pages.readyz),
        Mount("/static", StaticFiles(packages=[("webtier.demo.shop", "static")]), name="static"),
    ]


def create_app(
    tier: AsyncWebTier, database: str | sa.Engine, *, settings: ShopSettings | None = None
) -> ASGIApp:
    """Fake Web Retailer on ``tier`` (an asyncio tier) and ``database`` (a
    SQLAlchemy URL or Engine holding :mod:`webtier.demo.shopdb`'s tables,
    made by ``shopdb.create``). With ``settings.run_jobs`` the maintenance
    jobs run in the app's lifespan."""
    settings = settings or ShopSettings()
    engine = database if isinstance(database, sa.Engine) else open_engine(database)
    shopdb.serving(engine, lock_wait=settings.sql_wait)
    inventory = shopdb.inventory_source(engine)
    shop = Shop(tier, engine, inventory, settings)
    secret = settings.secret or secrets.token_bytes(32)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        views = tier.ranking.aggregator(flush_interval=settings.view_flush)
        await schedule_flash_sale(tier, inventory, settings)
        async with contextlib.AsyncExitStack() as stack:
            if settings.run_jobs:
                await stack.enter_async_context(maintenance(tier, inventory, settings))
            try:
                yield
            finally:
                await views.aclose()
                if not isinstance(database, sa.Engine):
                    engine.dispose()

    session_options = sessions.SessionOptions(signing_keys=[secret], cookie_name=SESSION_COOKIE)
    pages_app = Starlette(
        routes=routes(shop),
        exception_handlers={
            404: pages.not_found,
            405: pages.not_found,
            DatabaseUnavailable: pages.database_unavailable,
            SourceError: pages.database_unavailable,  # a row read through from the database
            # Here, not in webtier's layer: Starlette's error layer, inside
            # it, would answer a 500 first.
            RedisUnavailable: pages.redis_unavailable,
        },
        lifespan=lifespan,
    )
    pages_app.state.shop = shop
    # The two layers in front of Starlette as plain ASGI, not as Starlette's
    # middleware: a page answered from the cache crosses them and nothing
    # else (Starlette's error layers and router wrap the rendered pages only).
    app: ASGIApp = Defences(
        ASGIMiddleware(
            pages_app,
            tier=tier,
            pages=PAGE_RULES,
            holes=shop.holes,  # the visitor's parts of the cached pages
            item_views=True,
            sessions=session_options,
            timing=True,
            hits=HITS,
        ),
        secret=secret,
        session=session_options,
        posts=POSTS,
        pages=shop,
    )
    if not settings.dashboard:
        return app
    # The dashboard sees the tier as the shop's worker does: the inventory
    # among the row sources (its refresh lag) and the shop's session cap.
    return with_dashboard(
        app, AsyncWebTier(tier.client, jobs_config(tier.config, inventory, settings))
    )


DASHBOARD, METRICS = "/dashboard", "/metrics"


def with_dashboard(shop: ASGIApp, tier: AsyncWebTier) -> ASGIApp:
    """``shop`` with webtier's dashboard at ``/dashboard`` and the Prometheus
    exposition at ``/metrics``, in front of the shop's layers: their polls
    are neither timed as shop pages nor counted as its hits. Every
    request's ``Host`` must name this machine (400 otherwise)."""
    from webtier.metrics import asgi_app as metrics_app
    from webtier.web.dashboard import HostCheck, dashboard

    async def to_dashboard(request: Request) -> RedirectResponse:
        # The address `webtier demo` prints has no slash; the Mount below
        # only takes /dashboard/..., and the shop's catch-all would 404 it.
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"{request.scope.get('root_path', '')}{DASHBOARD}/{query}")

    tools = Starlette(
        routes=[
            Route(DASHBOARD, to_dashboard),
            Mount(DASHBOARD, dashboard(tier, rules=PAGE_RULES)),
            Route(METRICS, metrics_app(tier)),
        ]
    )

    async def front(scope: Scope, receive: Receive, send: Send) -> None:
        # A path test, not a router: the shop's pages (the lifespan too) go
        # straight to the shop's layers.
        path = route_path(scope)
        if path in (DASHBOARD, METRICS) or path.startswith(DASHBOARD + "/"):
            await tools(scope, receive, send)
        else:
            await shop(scope, receive, send)

    # Open, so on loopback only: and answering this machine's names only,
    # the shop's pages too (no DNS rebinding reads them).
    return HostCheck(front)


def route_path(scope: Scope) -> str:
    """The request's path below its root path, as Starlette's routes match
    it ("" for a lifespan)."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :]
    return path
