"""The pages that buy: the cart, checkout and an order."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from webtier.demo.shop import catalog
from webtier.demo.shop.context import Shop, notify, session_of, shop_of
from webtier.errors import CartLimit, ConfigError, OutcomeUnknown, OutOfStock, WebtierError
from webtier.web.sessions import AsyncSession

log = logging.getLogger("webtier.shop")

ORDERS = "orders"  # session data field: the ids of the orders this session placed
CHECKOUT_KEY = "checkout"  # session data field and form field: the cart's checkout key
STATS_CONTEXT = "shop:checkout"  # statistics: basket size and value per order
DURABLE_WAIT = 0.5  # seconds the replicas asked for (ShopSettings.durable) may take


def _see(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


def new_checkout_key() -> str:
    return secrets.token_urlsafe(18)  # 144 random bits: no one guesses another's


async def cart(request: Request) -> Response:
    """The cart's lines, priced from the row cache; its checkout form carries
    the session's checkout key (issued with the cart's first line; here for
    a cart that has none, one a login merged in)."""
    shop = shop_of(request)
    visitor = await shop.visitor(request)
    rows = await shop.items(sorted(visitor.cart))
    lines = [(row, visitor.cart[row["item_id"]]) for row in rows]
    total = sum(float(row["price"]) * count for row, count in lines)
    key = ""
    if visitor.cart:
        session = session_of(request)
        key = await session.get(CHECKOUT_KEY, "")
        if not key:
            key = new_checkout_key()
            await session.update({CHECKOUT_KEY: key})
    return shop.page(request, "cart.html", visitor, lines=lines, total=total, checkout_key=key)


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
    # The cart's checkout key, in the notice's write: the cart page that
    # follows only reads.
    issued = {} if await session.get(CHECKOUT_KEY) else {CHECKOUT_KEY: new_checkout_key()}
    await notify(session, done, also=issued)
    await replicated(shop)
    return _see("/cart")


async def checkout(request: Request) -> Response:
    """Form field ``checkout``: the key the cart page gave (else the
    session's). The order is written in one SQL transaction that claims the
    key, so a cart is taken once: every checkout with the same key, at once
    or later, answers with the one order. Then the session remembers the
    order and drops its cart and key, and the changed rows' cached copies
    and item pages are dropped (fenced: a load or render in flight cannot
    put the old stock back). A retry after any failure past the commit (a
    503 from Redis) finds the order by its key and finishes these steps."""
    shop = shop_of(request)
    session = session_of(request)
    current = await session.get(CHECKOUT_KEY)
    sent = str((await request.form()).get(CHECKOUT_KEY, "")).strip()[:64]
    key = sent or current
    lines = {int(item): count for item, count in (await session.cart()).items()}
    if key and (not lines or key != current):
        # A repeated checkout (the cart already taken, or the key no longer
        # the session's): its order, if it placed one.
        placed = await shop.sql(catalog.checkout_order, shop.engine, key)
        if placed is not None:
            if key == current:
                await taken(shop, session, placed)
            return _see(f"/orders/{placed.order_id}")
    if not lines:
        return await shop.problem(request, 400, "Empty cart", "There is nothing to check out.")
    if not key or key != current:
        return await shop.problem(
            request,
            409,
            "Cart changed",
            "This checkout form is out of date; nothing was ordered. "
            "Check your cart and check out again.",
        )
    user = await session.user()
    try:
        done = await shop.sql(catalog.check_out, shop.engine, key, lines, username=user)
    except OutOfStock as error:
        return await shop.problem(
            request,
            409,
            "Out of stock",
            f"Item {error.item_id} has fewer than {error.wanted} in stock; nothing was ordered.",
        )
    if done.new:
        try:
            await shop.tier.stats.record(STATS_CONTEXT, "BasketSize", done.order.items)
            await shop.tier.stats.record(STATS_CONTEXT, "BasketValue", float(done.order.total))
        except WebtierError as error:  # statistics are observability: never fail an order
            log.warning("checkout statistics not recorded: %s", error)
    thanks = f"Thank you: order {done.order.order_id} is placed." if done.new else None
    await taken(shop, session, done.order, notice=thanks)
    await replicated(shop)
    return _see(f"/orders/{done.order.order_id}")


async def replicated(shop: Shop) -> None:
    """With ``ShopSettings.durable`` replicas asked: wait until they hold
    the Redis writes made so far (the cart, the session's order and
    notices, the invalidated stock), so a failover right after the page
    answers cannot lose them. Fewer within :data:`DURABLE_WAIT`: an
    ``OutcomeUnknown`` (a 503 page); the writes are on the master, and the
    form sent again repeats them safely (a cart line's count; a checkout's
    key finds its order)."""
    wanted = shop.settings.durable
    if not wanted:
        return
    wait = getattr(shop.tier.client, "replicated", None)
    if wait is None:
        raise ConfigError("ShopSettings.durable needs webtier's own asyncio client")
    confirmed = await wait(wanted, DURABLE_WAIT)
    if confirmed < wanted:
        raise OutcomeUnknown(
            f"{confirmed} of the {wanted} replicas asked confirmed the writes "
            f"within {DURABLE_WAIT} s: applied on the master, may not survive a failover"
        )


async def taken(
    shop: Shop, session: AsyncSession, placed: catalog.Order, notice: str | None = None
) -> None:
    """What follows an order's commit, each step safe to repeat, in an order
    that keeps a retry able to finish them: the stock shown anew, the cart
    emptied, then one write that remembers the order, leaves ``notice`` and
    drops the key, last (while it is the session's, a checkout with it
    comes back here)."""
    await forget_stock(shop, placed.lines)
    await session.clear_cart()
    remembered = list(await session.get(ORDERS, ()))
    last: dict[str, Any] = {CHECKOUT_KEY: ""}  # no key: the next cart's first line gets one
    if placed.order_id not in remembered:
        last[ORDERS] = [*remembered[-49:], placed.order_id]
    if notice is None:
        await session.update(last)
    else:
        await notify(session, notice, also=last)


async def forget_stock(shop: Shop, lines: tuple[catalog.OrderLine, ...]) -> None:
    """After a stock change commits: drop each row's cached copy (fencing
    loads in flight), then each item's cached pages (fencing renders in
    flight). A render starting after this reads the row anew."""
    for line in lines:
        await shop.tier.rows.invalidate(shop.inventory, line.item_id)
    for line in lines:
        await shop.tier.pagecache.invalidate_item(str(line.item_id))


async def order(request: Request) -> Response:
    """An order, shown to the session that placed it (logged in since or
    not: the session's data follow its login) or to its user only."""
    shop = shop_of(request)
    text = request.path_params["order_id"]
    found = None
    if text.isascii() and text.isdigit() and len(text) <= 12:
        found = await shop.sql(catalog.order, shop.engine, int(text))
    visitor = await shop.visitor(request)
    mine = found is not None and (
        (found.username is not None and found.username == visitor.user)
        or found.order_id in await session_of(request).get(ORDERS, ())
    )
    if found is None or not mine:
        return await shop.problem(
            request, 404, "No such order", "You have no order of this number."
        )
    return shop.page(request, "order.html", visitor, order=found)
