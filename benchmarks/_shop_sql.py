"""The shop bench's SQL-only stack: the shop's pages with no Redis.

The session (user, cart, recently viewed, orders) is Starlette's signed
cookie, every row is read from SQL, and the home page's "most viewed" shelf
shows the best sellers: views are not counted, since one SQL write per page
view is not how anyone runs a shop on SQL alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp

from benchmarks._shop_stacks import (
    MOST_VIEWED,
    SECRET,
    Pages,
    Row,
    StackShop,
    routes_of,
    secured,
    see,
)
from webtier.demo import shopdb
from webtier.demo.shop import FLASH_SALE_ITEMS, catalog
from webtier.demo.shop.context import Visitor, render_item


class SqlShop(StackShop):
    """The shop's pages with no Redis: the session in a signed cookie."""

    def visitor(self, request: Request) -> Visitor:
        session = request.session
        cart = {int(i): int(n) for i, n in session.get("cart", {}).items()}
        return Visitor(session.get("user"), cart)

    async def rows(self, item_ids: list[int]) -> list[Row]:
        wanted = [i for i in dict.fromkeys(item_ids) if 1 <= i <= self.pages.items]
        found = await self.pages.sql(catalog.items, self.pages.engine, wanted) if wanted else {}
        return [found[i] for i in wanted if i in found]

    async def home(self, request: Request) -> Response:
        best = await self.pages.sql(best_sellers, self.pages.engine)
        return self.pages.page(
            request,
            "home.html",
            self.visitor(request),
            most_viewed=await self.rows([i for i, _ in best]),
            views=dict(best),
            viewed=[str(item) for item in request.session.get("viewed", [])],
        )

    async def item(self, request: Request) -> Response:
        item_id = self.pages.item_id(request.path_params["item_id"])
        visitor = self.visitor(request)
        found = [] if item_id is None else await self.rows([item_id])
        if item_id is None or not found:
            return self.pages.problem(request, visitor, 404, "No such item")
        if request.session:  # a visitor with a session has recently viewed items
            viewed = [item_id, *(i for i in request.session.get("viewed", []) if i != item_id)]
            request.session["viewed"] = viewed[:25]
        return render_item(self.pages.templates, request, visitor, item_id, found[0])

    async def change_cart(self, request: Request) -> Response:
        wanted = await self.quantity(request)
        if wanted is None:
            return self.pages.problem(request, self.visitor(request), 400, "Not a quantity")
        (item_id, count), cart = wanted, dict(request.session.get("cart", {}))
        if count:
            cart[str(item_id)] = count
        else:
            cart.pop(str(item_id), None)
        request.session["cart"] = cart
        return see("/cart")

    async def login(self, request: Request) -> Response:
        request.session["user"] = str((await request.form()).get("username", "")).strip()[:40]
        return see("/")

    async def logout(self, request: Request) -> Response:
        request.session.clear()
        return see("/")

    async def checkout(self, request: Request) -> Response:
        order = await self.place(request, self.visitor(request))
        if isinstance(order, Response):
            return order
        request.session["cart"] = {}
        request.session["orders"] = [*request.session.get("orders", [])[-49:], order.order_id]
        return see(f"/orders/{order.order_id}")

    async def order(self, request: Request) -> Response:
        session = request.session

        def mine(order: catalog.Order) -> bool:
            if order.username is not None:
                return order.username == session.get("user")
            return order.order_id in session.get("orders", [])

        return await self.shown_order(request, mine)

    async def account(self, request: Request) -> Response:
        visitor = self.visitor(request)
        if visitor.user is None:
            return see("/login")
        shown = [{"id": "this browser", "created": "-", "last_seen": "-"}]
        return self.pages.page(request, "account.html", visitor, sessions=shown)

    async def flash_sale(self, request: Request) -> Response:
        rows = await self.rows([i for i in FLASH_SALE_ITEMS if i <= self.pages.items])
        return self.pages.page(
            request, "flash_sale.html", self.visitor(request), items=rows, refresh=0
        )


def best_sellers(engine: sa.Engine) -> list[tuple[int, int]]:
    """The items sold most, as (item id, units): SQL's "most viewed"."""
    units = sa.func.sum(shopdb.order_lines.c.count)
    query = (
        sa.select(shopdb.order_lines.c.item_id, units)
        .group_by(shopdb.order_lines.c.item_id)
        .order_by(units.desc())
        .limit(MOST_VIEWED)
    )
    with engine.connect() as conn:
        return [(int(item), int(n)) for item, n in conn.execute(query)]


def sql_app(engine: sa.Engine, items: int) -> ASGIApp:
    pages = Pages(engine, items)
    session = Middleware(SessionMiddleware, secret_key=SECRET.decode(), same_site="lax")
    return secured(routes_of(SqlShop(pages)), pages, session)
