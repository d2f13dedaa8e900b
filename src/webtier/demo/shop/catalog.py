"""The shop's SQL side: items, and orders placed in one transaction.

No Redis here, so every stack of ``webtier bench shop`` (webtier, the
book's listings, SQL alone) reads and writes the database the same way.
The functions are blocking; an asyncio app runs them in a thread.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from webtier._core.extras import extra_needed
from webtier.demo.shopdb import checkouts, inventory, order_lines, orders
from webtier.errors import InvalidInput, OutOfStock

with extra_needed("sql", "the demo shop's catalog"):
    import sqlalchemy as sa

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class OrderLine:
    item_id: int
    name: str
    count: int
    price: Decimal  # the unit price paid


@dataclass(frozen=True, slots=True)
class Order:
    """An order as stored: who placed it, when, and its lines."""

    order_id: int
    username: str | None  # None: placed anonymously
    placed_at: dt.datetime
    items: int  # units over all lines
    total: Decimal
    lines: tuple[OrderLine, ...]


@dataclass(frozen=True, slots=True)
class Checkout:
    """What a checkout did: ``order`` is the order of its key, placed by this
    checkout (``new``) or by an earlier one with the same key."""

    order: Order
    new: bool


class _KeyClaimed(Exception):
    """The checkout key is taken: the transaction rolls back, nothing written."""


def item(engine: sa.Engine, item_id: int) -> Row | None:
    """One inventory row, or None."""
    with engine.connect() as conn:
        found = conn.execute(sa.select(inventory).where(inventory.c.item_id == item_id)).first()
    return None if found is None else dict(found._mapping)


def items(engine: sa.Engine, item_ids: Iterable[int]) -> dict[int, Row]:
    """Inventory rows by id (ids with no row are left out)."""
    wanted = sorted(set(item_ids))
    if not wanted:
        return {}
    with engine.connect() as conn:
        found = conn.execute(sa.select(inventory).where(inventory.c.item_id.in_(wanted)))
        return {row.item_id: dict(row._mapping) for row in found}


def place_order(
    engine: sa.Engine,
    lines: Mapping[int, int],
    *,
    username: str | None = None,
    now: dt.datetime | None = None,
) -> Order:
    """Place an order of ``lines`` (item id -> units) in one transaction:
    each item's stock is decremented only if it holds enough, then the order
    and its lines are written at the prices read in the same transaction.
    Raises :class:`~webtier.errors.OutOfStock` naming the first item short
    of stock (or unknown), and nothing is written."""
    return _place(engine, lines, username, now, key=None)


def _place(
    engine: sa.Engine,
    lines: Mapping[int, int],
    username: str | None,
    now: dt.datetime | None,
    *,
    key: str | None,
) -> Order:
    wanted = {int(i): int(n) for i, n in lines.items() if int(n) > 0}
    if not wanted:
        raise InvalidInput("lines", "an order needs at least one item", dict(lines))
    placed = now or dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)
    with engine.begin() as conn:
        if key is not None:
            # The claim is the transaction's first statement: it waits for a
            # concurrent claim of the same key to commit or roll back, and no
            # stock is read or taken before the key is known to be free.
            try:
                conn.execute(checkouts.insert().values(checkout_key=key))
            except sa.exc.IntegrityError:
                raise _KeyClaimed from None  # rolls back (PostgreSQL's is aborted)
        # Ids in order: two orders sharing items lock their rows in one order.
        for item_id in sorted(wanted):
            count = wanted[item_id]
            taken = conn.execute(
                inventory.update()
                .where(inventory.c.item_id == item_id, inventory.c.stock >= count)
                .values(stock=inventory.c.stock - count, updated_at=placed)
            )
            if taken.rowcount != 1:
                raise OutOfStock(item_id, count)  # rolls the whole transaction back
        rows = conn.execute(
            sa.select(inventory.c.item_id, inventory.c.name, inventory.c.price).where(
                inventory.c.item_id.in_(sorted(wanted))
            )
        )
        priced = [OrderLine(r.item_id, r.name, wanted[r.item_id], r.price) for r in rows]
        total = sum((line.price * line.count for line in priced), Decimal("0.00"))
        units = sum(wanted.values())
        order_id: int = conn.execute(
            orders.insert()
            .values(username=username, placed_at=placed, items=units, total=total)
            .returning(orders.c.order_id)
        ).scalar_one()
        conn.execute(
            order_lines.insert(),
            [
                {"order_id": order_id, "item_id": line.item_id, "count": line.count,
                 "price": line.price}
                for line in priced
            ],
        )  # fmt: skip
        if key is not None:
            conn.execute(
                checkouts.update().where(checkouts.c.checkout_key == key).values(order_id=order_id)
            )
    return Order(order_id, username, placed, units, total, tuple(priced))


def check_out(
    engine: sa.Engine,
    key: str,
    lines: Mapping[int, int],
    *,
    username: str | None = None,
    now: dt.datetime | None = None,
) -> Checkout:
    """Place the order of checkout ``key`` once: the key is claimed in the
    order's own transaction, so of any checkouts sharing it (concurrent or
    repeated) one places the order and every other answers with that order,
    whatever the lines. Raises :class:`~webtier.errors.OutOfStock` as
    :func:`place_order` does (the key stays free)."""
    try:
        return Checkout(_place(engine, lines, username, now, key=key), True)
    except _KeyClaimed:
        pass
    found = checkout_order(engine, key)
    if found is None:  # a claim commits with its order: cannot be, unless deleted since
        raise InvalidInput("key", "was claimed by a checkout whose order is gone", key)
    return Checkout(found, False)


def checkout_order(engine: sa.Engine, key: str) -> Order | None:
    """The order placed by checkout ``key``, or None."""
    with engine.connect() as conn:
        order_id = conn.scalar(
            sa.select(checkouts.c.order_id).where(checkouts.c.checkout_key == key)
        )
    return None if order_id is None else order(engine, order_id)


def order(engine: sa.Engine, order_id: int) -> Order | None:
    """The order of ``order_id`` with its lines, or None."""
    with engine.connect() as conn:
        head = conn.execute(sa.select(orders).where(orders.c.order_id == order_id)).first()
        if head is None:
            return None
        found = conn.execute(
            sa.select(order_lines.c.item_id, inventory.c.name, order_lines.c.count,
                      order_lines.c.price)
            .join(inventory, inventory.c.item_id == order_lines.c.item_id)
            .where(order_lines.c.order_id == order_id)
            .order_by(order_lines.c.item_id)
        )  # fmt: skip
        # Row.count is the tuple method: the column is read by name.
        lines = tuple(OrderLine(r.item_id, r.name, r._mapping["count"], r.price) for r in found)
    return Order(head.order_id, head.username, head.placed_at, head.items, head.total, lines)


def count_orders(engine: sa.Engine) -> int:
    """How many orders the database holds."""
    with engine.connect() as conn:
        return int(conn.scalar(sa.select(sa.func.count()).select_from(orders)) or 0)
