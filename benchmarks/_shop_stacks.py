"""The shop bench's two other stacks: the same pages, templates, routes and
security middleware as :func:`webtier.demo.shop.create_app`, with the web
tier done another way.

* the book's: Listings 2.1-2.11 as ported in :mod:`benchmarks.book` (keys,
  round trips and flaws included): the token cookie the book gives a
  visitor on their first write, ``check_token`` and ``update_token`` on
  every request that carries it, ``count_view`` for the views of
  visitors without one, ``cache_request`` for the item pages of visitors
  without one, rows read from ``inv:<id>`` (kept by the ``cache_rows``
  daemon, :func:`book_daemon`) else SQL, ``add_to_cart`` for the cart. The
  book invalidates nothing at checkout: its pages and rows show the old
  stock until they expire, as printed.
* SQL alone: :mod:`benchmarks._shop_sql`.

Both render with the shop's templates from plain data, and call SQL
through :mod:`webtier.demo.shop.catalog` in worker threads, as the shop does.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import redis
import sqlalchemy as sa
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from benchmarks import book
from webtier.demo.shop import FLASH_SALE_ITEMS, catalog
from webtier.demo.shop.context import Visitor, render, render_item, templates
from webtier.demo.shop.security import Defences
from webtier.errors import OutOfStock
from webtier.web.sessions import SessionOptions

T = TypeVar("T")
Row = dict[str, Any]

BOOK_COOKIE = "token"  # the book's login cookie: a bare token, unsigned
MOST_VIEWED = 8
SECRET = b"the shop bench's own signing key!"
POSTS = ("/cart", "/login", "/logout", "/checkout")
BOOK_ROW_DELAY = 300.0  # seconds between refreshes of a cached row (the page cache's TTL)
FLASH_DELAY = 1.0  # as the shop's flash-sale rows


class Pages:
    """The shop's templates and its SQL threads, for a stack's handlers."""

    def __init__(self, engine: sa.Engine, items: int) -> None:
        self.engine, self.items = engine, items
        self.templates = templates()
        self.limiter = anyio.CapacityLimiter(16)

    async def sql(self, call: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(functools.partial(call, *args), limiter=self.limiter)

    def item_id(self, text: str) -> int | None:
        if not text.isascii() or not text.isdigit() or len(text) > 9:
            return None
        number = int(text)
        return number if 1 <= number <= self.items else None

    def page(
        self, request: Request, template: str, visitor: Visitor, *, status: int = 200, **data: Any
    ) -> HTMLResponse:
        return render(self.templates, request, template, visitor, status=status, **data)

    def problem(self, request: Request, visitor: Visitor, status: int, title: str) -> Response:
        return self.page(
            request, "problem.html", visitor, status=status, title=title, message=title + "."
        )


def see(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


def secured(routes: list[Route], pages: Pages, *more: Middleware, lifespan: Any = None) -> ASGIApp:
    """The routes, with ``more`` inside Starlette, behind the shop's own
    security layer (headers, CSRF, token filling) in front of Starlette,
    as webtier's shop has it."""

    async def not_found(request: Request, error: Exception) -> Response:
        return pages.problem(request, Visitor(), 404, "Page not found")

    app = Starlette(
        routes=routes,
        middleware=list(more),
        exception_handlers={404: not_found, 405: not_found},
        lifespan=lifespan,
    )
    app.state.shop = pages
    # The stacks' sessions are not webtier's: tokens bind to the visitor id.
    return Defences(app, secret=SECRET, session=SessionOptions(), posts=POSTS, pages=pages)


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


class StackShop:
    """What both stacks' pages share, given a visitor and rows of their own."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages

    def visitor(self, request: Request) -> Visitor:
        raise NotImplementedError

    async def rows(self, item_ids: list[int]) -> list[Row]:
        raise NotImplementedError

    async def cart(self, request: Request) -> Response:
        visitor = self.visitor(request)
        rows = await self.rows(sorted(visitor.cart))
        lines = [(row, visitor.cart[row["item_id"]]) for row in rows]
        total = sum(float(row["price"]) * count for row, count in lines)
        return self.pages.page(request, "cart.html", visitor, lines=lines, total=total)

    async def login_form(self, request: Request) -> Response:
        return self.pages.page(request, "login.html", self.visitor(request))

    async def quantity(self, request: Request) -> tuple[int, int] | None:
        """The cart form's item and new count, or None if either is wrong."""
        form = await request.form()
        item_id = self.pages.item_id(str(form.get("item", "")))
        count = str(form.get("count", ""))
        if item_id is None or not count.isdigit() or len(count) > 6:
            return None
        return item_id, int(count)

    async def place(self, request: Request, visitor: Visitor) -> catalog.Order | Response:
        """The visitor's cart as an order (catalog.place_order), or the page
        that says why not."""
        if not visitor.cart:
            return self.pages.problem(request, visitor, 400, "Empty cart")
        try:
            return await self.pages.sql(
                functools.partial(catalog.place_order, username=visitor.user),
                self.pages.engine,
                visitor.cart,
            )
        except OutOfStock:
            return self.pages.problem(request, visitor, 409, "Out of stock")

    async def shown_order(
        self, request: Request, mine: Callable[[catalog.Order], bool]
    ) -> Response:
        visitor = self.visitor(request)
        text = request.path_params["order_id"]
        found = None
        if text.isdigit() and len(text) <= 12:
            found = await self.pages.sql(catalog.order, self.pages.engine, int(text))
        if found is None or not mine(found):
            return self.pages.problem(request, visitor, 404, "No such order")
        return self.pages.page(request, "order.html", visitor, order=found)


# -- the book's listings ---------------------------------------------------------------------


class BookShop(StackShop):
    """The shop's pages on the book's listings (a redis-py client of its own
    database, decoding replies as the listings expect)."""

    def __init__(self, conn: redis.Redis, pages: Pages) -> None:
        super().__init__(pages)
        self.conn: Any = conn  # as the listings take it: replies decoded, untyped

    def token(self, request: Request) -> str | None:
        return request.cookies.get(BOOK_COOKIE)

    def visitor(self, request: Request, item: int | None = None) -> Visitor:
        """Listing 2.1's check, then 2.2/2.9's update_token on every request
        of a visitor with a token; without one, the view is still counted."""
        token = self.token(request)
        if token is None:
            if item is not None:
                book.count_view(self.conn, str(item))
            return Visitor()
        user = book.check_token(self.conn, token) or None
        book.update_token(self.conn, token, user or "", None if item is None else str(item))
        cart = {int(i): int(n) for i, n in self.conn.hgetall("cart:" + token).items()}
        return Visitor(user, cart)

    async def rows(self, item_ids: list[int]) -> list[Row]:
        """Rows from ``inv:<id>`` where the daemon keeps them, else SQL."""
        wanted = [i for i in dict.fromkeys(item_ids) if 1 <= i <= self.pages.items]
        cached = self.conn.mget([f"inv:{i}" for i in wanted]) if wanted else []
        found = {i: json.loads(text) for i, text in zip(wanted, cached, strict=True) if text}
        missing = [i for i in wanted if i not in found]
        if missing:
            found.update(await self.pages.sql(catalog.items, self.pages.engine, missing))
        return [found[i] for i in wanted if i in found]

    async def home(self, request: Request) -> Response:
        visitor = self.visitor(request)
        top = self.conn.zrange("viewed:", 0, MOST_VIEWED - 1, withscores=True)
        token = self.token(request)
        recent = self.conn.zrevrange("viewed:" + token, 0, -1) if token else []
        return self.pages.page(
            request,
            "home.html",
            visitor,
            most_viewed=await self.rows([int(i) for i, _ in top]),
            views={int(i): int(-score) for i, score in top},
            viewed=list(recent),
        )

    async def item(self, request: Request) -> Response:
        item_id = self.pages.item_id(request.path_params["item_id"])
        if item_id is None:
            return self.pages.problem(request, Visitor(), 404, "No such item")
        visitor = self.visitor(request, item_id)
        found = await self.rows([item_id])
        if not found:
            return self.pages.problem(request, visitor, 404, "No such item")

        def render(_: str) -> str:
            response = render_item(self.pages.templates, request, visitor, item_id, found[0])
            return bytes(response.body).decode()

        if self.token(request) is not None:
            return HTMLResponse(render(""))
        # Listings 2.6 and 2.11: ZRANK viewed:, then GET (SET on a miss).
        page = book.cache_request(self.conn, f"/item?item={item_id}", render)
        return HTMLResponse(page.decode() if isinstance(page, bytes) else page)

    def _session(self, request: Request, response: Response) -> str:
        """The visitor's token, made on their first write (as a cookie)."""
        token = self.token(request)
        if token is None:
            token = uuid.uuid4().hex
            book.update_token(self.conn, token, "")
        response.set_cookie(BOOK_COOKIE, token, httponly=True, samesite="lax")
        return token

    async def change_cart(self, request: Request) -> Response:
        wanted = await self.quantity(request)
        if wanted is None:
            return self.pages.problem(request, self.visitor(request), 400, "Not a quantity")
        response = see("/cart")
        book.add_to_cart(self.conn, self._session(request, response), str(wanted[0]), wanted[1])
        return response

    async def login(self, request: Request) -> Response:
        username = str((await request.form()).get("username", "")).strip()[:40]
        response = see("/")
        book.update_token(self.conn, self._session(request, response), username)
        return response

    async def logout(self, request: Request) -> Response:
        response = see("/")  # the book has no logout: the cookie goes, the token stays
        response.delete_cookie(BOOK_COOKIE)
        return response

    async def checkout(self, request: Request) -> Response:
        visitor, token = self.visitor(request), self.token(request)
        order = await self.place(request, visitor)
        if isinstance(order, Response) or token is None:
            return order if isinstance(order, Response) else see("/cart")
        self.conn.delete("cart:" + token)
        self.conn.sadd("orders:" + token, order.order_id)
        return see(f"/orders/{order.order_id}")

    async def order(self, request: Request) -> Response:
        token = self.token(request)
        user = None if token is None else book.check_token(self.conn, token)

        def mine(order: catalog.Order) -> bool:
            if order.username is not None:
                return bool(user) and order.username == user
            return token is not None and bool(
                self.conn.sismember("orders:" + token, order.order_id)
            )

        return await self.shown_order(request, mine)

    async def account(self, request: Request) -> Response:
        visitor = self.visitor(request)
        if visitor.user is None:
            return see("/login")
        # The book keeps no sessions per user: this one is all it can show.
        now = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        shown = [{"id": "this session", "created": "-", "last_seen": now}]
        return self.pages.page(request, "account.html", visitor, sessions=shown)

    async def flash_sale(self, request: Request) -> Response:
        visitor = self.visitor(request)
        rows = await self.rows([i for i in FLASH_SALE_ITEMS if i <= self.pages.items])
        return self.pages.page(request, "flash_sale.html", visitor, items=rows, refresh=FLASH_DELAY)


def routes_of(shop: Any) -> list[Route]:
    return [
        Route("/", shop.home),
        Route("/item/{item_id}", shop.item),
        Route("/cart", shop.cart),
        Route("/cart", shop.change_cart, methods=["POST"]),
        Route("/checkout", shop.checkout, methods=["POST"]),
        Route("/orders/{order_id}", shop.order),
        Route("/login", shop.login_form),
        Route("/login", shop.login, methods=["POST"]),
        Route("/logout", shop.logout, methods=["POST"]),
        Route("/account", shop.account),
        Route("/flash-sale", shop.flash_sale),
        Route("/healthz", healthz),
    ]


def book_app(redis_url: str, engine: sa.Engine, items: int) -> ASGIApp:
    pages = Pages(engine, items)
    conn = redis.Redis.from_url(redis_url, decode_responses=True)
    return secured(routes_of(BookShop(conn, pages)), pages)


def book_daemon(redis_url: str, engine: sa.Engine, items: int, stop: threading.Event) -> None:
    """The book's daemons in one loop: Listing 2.8's cache_rows over the
    top items (and the flash sale's, every second), 2.5's session cleaner
    once a second, 2.10's rescale every 5 minutes."""
    conn = redis.Redis.from_url(redis_url, decode_responses=True)
    for item_id in range(1, min(items, 10_000) + 1):
        book.schedule_row_cache(conn, str(item_id), BOOK_ROW_DELAY)
    for item_id in FLASH_SALE_ITEMS:
        if item_id <= items:
            book.schedule_row_cache(conn, str(item_id), FLASH_DELAY)

    def inventory_get(row_id: str) -> Row | None:
        return catalog.item(engine, int(row_id))

    cleaned = rescaled = time.monotonic()
    while not stop.is_set():
        if not book.cache_rows_step(conn, inventory_get):
            stop.wait(0.05)
        now = time.monotonic()
        if now - cleaned >= 1:
            book.clean_full_sessions_step(conn)
            cleaned = now
        if now - rescaled >= 300:
            book.rescale_viewed_pass(conn)
            rescaled = now
