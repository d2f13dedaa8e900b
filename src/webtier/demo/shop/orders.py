"""The pages that buy: the cart, checkout and an order."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from webtier.demo.shop import catalog
from webtier.demo.shop.context import Shop, notify, session_of, shop_of
from webtier.errors import CartLimit, OutOfStock, WebtierError

log = logging.getLogger("webtier.shop")

ORDERS = "orders"  # session data field: the ids of the orders this session placed
STATS_CONTEXT = "shop:checkout"  # statistics: basket size and value per order


def _see(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


async def cart(request: Request) -> Response:
    """The cart's lines, priced from the row cache."""
    shop = shop_of(request)
    visitor = await shop.visitor(request)
    rows = await shop.items(sorted(visitor.cart))
    lines = [(row, visitor.cart[row["item_id"]]) for row in rows]
    total = sum(float(row["price"]) * count for row, count in lines)
    return shop.page(request, "cart.html", visitor, lines=lines, total=total)


async def change_cart(request: Request) -> Response:
    """Form fields ``item`` and ``count`` (the new quantity; 0 removes it)."""
    shop = shop_of(request)
    form = await request.form()
    item_text, count_text = str(form.get("item", "")).strip(), str(form.get("count", "")).strip()
    item_id = shop.item_id(item_text)
    if item_id is None or await shop.item(item_id) is None:
        return await shop.problem(request, 400, "No such item", f"No item {item_text[:20]!r}.")
    most = shop.tier.config.sessions.cart_count
    if not count_text.isascii() or not count_text.isdigit() or len(count_text) > 6:
        return await shop.problem(
            request, 400, "Not a quantity", f"The quantity must be a whole number, 0 to {most}."
        )
    count = int(count_text)
    session = session_of(request)
    try:
        await session.set_cart(str(item_id), count)
    except CartLimit as error:
        lines = shop.tier.config.sessions.cart_lines
        detail = f"at most {most} of one item" if error.field == "count" else f"{lines} items"
        return await shop.problem(
            request, 400, "Cart limit", f"A cart holds {detail}; nothing was changed."
        )
    done = f"Item {item_id} removed." if count == 0 else f"Item {item_id}: {count} in your cart."
    await notify(session, done)
    return _see("/cart")


async def checkout(request: Request) -> Response:
    """The order is written in one SQL transaction; then the changed rows'
    cached copies and item pages are dropped (fenced: a load or render in
    flight cannot put the old stock back), and the basket recorded."""
    shop = shop_of(request)
    session = session_of(request)
    lines = {int(item): count for item, count in (await session.cart()).items()}
    if not lines:
        return await shop.problem(request, 400, "Empty cart", "There is nothing to check out.")
    user = await session.user()
    try:
        order = await shop.sql(catalog.place_order, shop.engine, lines, username=user)
    except OutOfStock as error:
        return await shop.problem(
            request,
            409,
            "Out of stock",
            f"Item {error.item_id} has fewer than {error.wanted} in stock; nothing was ordered.",
        )
    # The order stands: the session forgets the cart and remembers the order
    # first, so a retried request cannot order twice.
    placed = list(await session.get(ORDERS, ()))
    await session.update({ORDERS: [*placed[-49:], order.order_id]})
    await session.clear_cart()
    await forget_stock(shop, order.lines)
    try:
        await shop.tier.stats.record(STATS_CONTEXT, "BasketSize", order.items)
        await shop.tier.stats.record(STATS_CONTEXT, "BasketValue", float(order.total))
    except WebtierError as error:  # statistics are observability: never fail an order
        log.warning("checkout statistics not recorded: %s", error)
    await notify(session, f"Thank you: order {order.order_id} is placed.")
    return _see(f"/orders/{order.order_id}")


async def forget_stock(shop: Shop, lines: tuple[catalog.OrderLine, ...]) -> None:
    """After a stock change commits: drop each row's cached copy (fencing
    loads in flight), then each item's cached pages (fencing renders in
    flight). A render starting after this reads the row anew."""
    for line in lines:
        await shop.tier.rows.invalidate(shop.inventory, line.item_id)
    for line in lines:
        await shop.tier.pagecache.invalidate_item(str(line.item_id))


async def order(request: Request) -> Response:
    """An order, shown to the session that placed it or to its user only."""
    shop = shop_of(request)
    text = request.path_params["order_id"]
    found = None
    if text.isascii() and text.isdigit() and len(text) <= 12:
        found = await shop.sql(catalog.order, shop.engine, int(text))
    visitor = await shop.visitor(request)
    mine = found is not None and (
        (found.username is not None and found.username == visitor.user)
        or (visitor.user is None and found.order_id in await session_of(request).get(ORDERS, ()))
    )
    if found is None or not mine:
        return await shop.problem(
            request, 404, "No such order", "You have no order of this number."
        )
    return shop.page(request, "order.html", visitor, order=found)
