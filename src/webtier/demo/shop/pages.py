"""The pages that read: home, item, flash sale, health, not found."""

from __future__ import annotations

import logging

import anyio
import sqlalchemy as sa
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from webtier import time_limit
from webtier.demo import shopdb
from webtier.demo.shop.context import Shop, Visitor, render_item, session_of, shop_of
from webtier.demo.shop.settings import FLASH_SALE_ITEMS, SESSION_COOKIE
from webtier.errors import WebtierError

READY_BUDGET = 1.0  # seconds each of Redis and the database has to answer /readyz

log = logging.getLogger("webtier.shop")

RETRY_AFTER = 5  # seconds, in a 503's Retry-After


def _ids(names: list[str]) -> list[int]:
    return [int(name) for name in names if name.isdigit()]


async def home(request: Request) -> Response:
    """The most viewed items (the ranking) and the visitor's recently viewed
    items (the session). The same page for every visitor, their parts left
    as holes (the page cache fills them from each visitor's session), but
    for a visitor with a session the cache did not answer (a notice to
    show, a reload): theirs, written in."""
    shop = shop_of(request)
    top = await shop.tier.ranking.top(shop.settings.most_viewed)
    most_viewed = _ids([item for item, _ in top])
    rows = {row["item_id"]: row for row in await shop.items(most_viewed)}
    shown = [rows[i] for i in most_viewed if i in rows]
    views = {int(item): int(count) for item, count in top if item.isdigit()}
    if SESSION_COOKIE not in request.cookies:
        return shop.page(
            request, "home.html", Visitor(), most_viewed=shown, views=views, holes=True
        )
    visitor = await shop.visitor(request)  # read: this page is theirs, never stored
    viewed = await session_of(request).recently_viewed()
    return shop.page(request, "home.html", visitor, most_viewed=shown, views=views, viewed=viewed)


async def item(request: Request) -> Response:
    """An item's price and stock from the row cache: the same page for every
    visitor, their name, cart and recently viewed left as holes, which the
    page cache keeps and webtier's ASGI layer fills from each visitor's
    session. The layer counts the view too (item_views=True): in the
    session's recently viewed and the ranking, in the page's round trip."""
    shop = shop_of(request)
    item_id = shop.item_id(request.path_params["item_id"])
    row = None if item_id is None else await shop.item(item_id)
    if item_id is None or row is None:
        return await shop.problem(
            request, 404, "No such item", "There is no item with this number in the shop."
        )
    return render_item(shop.templates, request, Visitor(), item_id, row, holes=True)


async def flash_sale(request: Request) -> Response:
    """The flash-sale items, whose rows the worker refreshes every second:
    the same page for every visitor, their parts left as holes (the page
    cache keeps it half a second)."""
    shop = shop_of(request)
    rows = await shop.items(i for i in FLASH_SALE_ITEMS if i <= shop.settings.items)
    refresh = shop.settings.flash_refresh
    return shop.page(request, "flash_sale.html", Visitor(), items=rows, refresh=refresh, holes=True)


async def healthz(request: Request) -> Response:
    """Liveness: the process serves requests. No session, no Redis, no
    database: an outage of those is /readyz's to say (restarting the shop
    would not end it)."""
    return PlainTextResponse("ok")


async def readyz(request: Request) -> Response:
    """Readiness for a load balancer: 200 if Redis and the database both
    answer within READY_BUDGET seconds, else 503, one line for each."""
    shop = shop_of(request)
    redis, database = await _redis_answers(shop), await _database_answers(shop)
    ready = redis == database == "ok"
    body = f"{'ready' if ready else 'not ready'}\nredis: {redis}\ndatabase: {database}\n"
    return PlainTextResponse(body, status_code=200 if ready else 503)


async def _redis_answers(shop: Shop) -> str:
    try:
        with time_limit(READY_BUDGET):
            await shop.tier.deployment.stored()  # one GET, on any deployment
    except WebtierError as error:
        return f"unreachable ({error})"
    return "ok"


def _read_one_item(engine: sa.Engine) -> None:
    with engine.connect() as connection:
        connection.execute(sa.select(shopdb.inventory.c.item_id).limit(1)).all()


async def _database_answers(shop: Shop) -> str:
    try:
        with anyio.fail_after(READY_BUDGET):
            await shop.sql(_read_one_item, shop.engine)
    except TimeoutError:
        return f"no answer within {READY_BUDGET:.0f} s"
    except WebtierError as error:  # DatabaseUnavailable: the driver's words in it
        return f"unreachable ({error})"
    except sa.exc.SQLAlchemyError as error:
        cause = getattr(error, "orig", None) or error  # the driver's own words
        return f"unreachable ({type(cause).__name__}: {str(cause).splitlines()[0]})"
    return "ok"


async def database_unavailable(request: Request, error: Exception) -> Response:
    """A page whose database (or its row, read through) cannot be had just
    now: a 503 saying so, never a 500; nothing was changed."""
    log.warning("%s %s: 503: %s", request.method, request.url.path, error)
    page = await shop_of(request).problem(
        request,
        503,
        "Back shortly",
        "The shop cannot reach its database just now; nothing was changed. "
        "Try again in a few seconds.",
    )
    page.headers["Retry-After"] = str(RETRY_AFTER)
    return page


async def redis_unavailable(request: Request, error: Exception) -> Response:
    """A page that needed Redis (the session, the cart, a row) while it is
    away: a 503 saying so, never a 500; the visitor shown as anonymous (their
    session is in Redis too)."""
    log.warning("%s %s: 503: %s", request.method, request.url.path, error)
    page = shop_of(request).page(
        request,
        "problem.html",
        Visitor(),
        status=503,
        title="Back shortly",
        message="The shop cannot reach its session store just now; nothing was changed. "
        "Try again in a few seconds.",
    )
    page.headers["Retry-After"] = str(RETRY_AFTER)
    return page


async def not_found(request: Request, error: Exception) -> Response:
    """Any path the shop does not serve, and any HTTP error Starlette raises."""
    shop = shop_of(request)
    status = error.status_code if isinstance(error, HTTPException) else 404
    if status == 405:
        return await shop.problem(request, 405, "Not allowed", "This page does not take that.")
    return await shop.problem(
        request, status, "Page not found", "The shop has no page at this address."
    )
