"""The demo shop's database: Fake Web Retailer's inventory and its orders,
in SQLite by default (``webtier rows init`` or ``webtier demo`` makes it) or
any database SQLAlchemy speaks.

Its rows hold the types a real shop's do (decimal prices, dates, times,
UUIDs, NULLs), so the row cache is shown, tested and benchmarked on them.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from webtier._core.extras import extra_needed
from webtier.rows.sql import SqlSource

with extra_needed("sql", "the demo shop's database"):
    import sqlalchemy as sa

metadata = sa.MetaData()

inventory = sa.Table(
    "inventory",
    metadata,
    sa.Column("item_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("sku", sa.Uuid, nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("price", sa.Numeric(10, 2), nullable=False),
    sa.Column("stock", sa.Integer, nullable=False),
    sa.Column("sale_ends", sa.Date, nullable=True),  # NULL: not on sale
    sa.Column("restocked_at", sa.DateTime, nullable=True),
    sa.Column("updated_at", sa.DateTime, nullable=False),
)

orders = sa.Table(
    "orders",
    metadata,
    sa.Column("order_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("username", sa.String(100), nullable=True),  # NULL: placed anonymously
    sa.Column("placed_at", sa.DateTime, nullable=False),
    sa.Column("items", sa.Integer, nullable=False),  # units over all lines
    sa.Column("total", sa.Numeric(12, 2), nullable=False),
)

order_lines = sa.Table(
    "order_lines",
    metadata,
    sa.Column("order_id", sa.ForeignKey("orders.order_id"), primary_key=True),
    sa.Column("item_id", sa.ForeignKey("inventory.item_id"), primary_key=True),
    sa.Column("count", sa.Integer, nullable=False),
    sa.Column("price", sa.Numeric(10, 2), nullable=False),  # the unit price paid
)

# A checkout's idempotency key, claimed in the transaction that writes its
# order: a second checkout with the same key (a double click, a retry after
# a lost answer) finds this row and answers with the order, never a second one.
checkouts = sa.Table(
    "checkouts",
    metadata,
    sa.Column("checkout_key", sa.String(64), primary_key=True),
    # NULL only inside the claiming transaction, before its order is written.
    sa.Column("order_id", sa.ForeignKey("orders.order_id"), nullable=True, unique=True),
)

_WORDS = (
    "red", "blue", "oak", "steel", "mini", "pro", "lamp", "chair", "mug", "kettle",
    "scarf", "boots", "radio", "clock", "desk", "jar",
)  # fmt: skip


def inventory_source(database: str | sa.URL | sa.Engine) -> SqlSource:
    """The row source of the inventory table (the book's ``Inventory``)."""
    return SqlSource("inventory", inventory, key="item_id", database=database)


def item(item_id: int, rng: random.Random) -> dict[str, Any]:
    """A plausible inventory row."""
    name = f"{rng.choice(_WORDS)} {rng.choice(_WORDS)} #{item_id}"
    updated = dt.datetime(2024, 1, 1) + dt.timedelta(seconds=rng.randrange(30_000_000))
    return {
        "item_id": item_id,
        "sku": uuid.UUID(int=rng.getrandbits(128), version=4),
        "name": name,
        "price": Decimal(rng.randrange(99, 100_000)) / 100,
        "stock": rng.randrange(0, 500),
        "sale_ends": (updated.date() + dt.timedelta(days=7)) if rng.random() < 0.3 else None,
        "restocked_at": (updated - dt.timedelta(hours=3)) if rng.random() < 0.5 else None,
        "updated_at": updated,
    }


def make_room(engine: sa.Engine) -> bool:
    """Make the folder of a SQLite file; whether the database is one."""
    if engine.dialect.name != "sqlite" or not engine.url.database:
        return False
    Path(engine.url.database).parent.mkdir(parents=True, exist_ok=True)
    return True


def create(
    engine: sa.Engine,
    items: int = 1000,
    *,
    seed: int = 0,
    reset: bool = False,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Create the shop's tables and add items 1..``items`` that are missing;
    with ``reset``, start from empty tables. ``progress`` is called with the
    rows added by each batch. Returns the rows added."""
    if make_room(engine):
        with engine.connect() as conn:
            # Readers go on while a checkout writes (the setting stays with the file).
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")
    if reset:
        metadata.drop_all(engine)
    metadata.create_all(engine)
    rng = random.Random(seed)
    with engine.begin() as conn:
        present = set(conn.scalars(sa.select(inventory.c.item_id)))
        if len(present) >= items and all(i in present for i in range(1, items + 1)):
            return 0  # a second run: nothing to make
        missing = []
        for item_id in range(1, items + 1):
            row = item(item_id, rng)  # drawn for every id: an item is the same on every run
            if item_id not in present:
                missing.append(row)
        for at in range(0, len(missing), BATCH):
            conn.execute(inventory.insert(), missing[at : at + BATCH])
            if progress is not None:
                progress(len(missing[at : at + BATCH]))
    return len(missing)


BATCH = 5000  # rows per INSERT
