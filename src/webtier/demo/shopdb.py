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
from webtier.errors import ConfigError
from webtier.rows.sql import SqlSource

with extra_needed("sql", "the demo shop's database"):
    import sqlalchemy as sa
    from sqlalchemy.dialects.postgresql import insert as postgresql_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

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


SHOP_INVENTORY = "shop.inventory"  # the row source's name, its cache's in Redis


def inventory_source(database: str | sa.URL | sa.Engine) -> SqlSource:
    """The row source of the inventory table (the book's ``Inventory``),
    named in a namespace of the shop's own: a source of yours named
    ``inventory`` never meets the shop's cached rows."""
    return SqlSource(SHOP_INVENTORY, inventory, key="item_id", database=database)


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


def serving(engine: sa.Engine, *, lock_wait: float) -> sa.Engine:
    """``engine`` made fit to serve pages: a statement waits at most
    ``lock_wait`` seconds for a lock another transaction holds (SQLite's
    own wait is 5 s, PostgreSQL's for ever). For a SQLite file, a pooled
    connection whose file was moved away or replaced since it opened is
    dropped when next taken, and one that finds the file broken takes the
    whole pool with it. The next call opens the file anew, so the shop
    recovers by itself when the file comes back (an engine of
    :func:`~webtier.rows.sql.open_engine` never creates one in its place)."""
    if engine.dialect.name == "postgresql":
        sa.event.listen(engine, "connect", _postgresql_lock_timeout(lock_wait))
        engine.dispose()  # connections made before wait for ever
        return engine
    path = _sqlite_file(engine)
    if path is None:
        return engine

    def on_connect(dbapi_connection: Any, record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(lock_wait * 1000)}")
        cursor.close()
        record.info["file"] = _identity(path)

    def on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        # A connection keeps reading and writing the file it opened, even
        # moved away: the file at the path is the one to use.
        if record.info.get("file") != _identity(path):
            raise sa.exc.DisconnectionError(f"{path} was moved or replaced")

    def on_error(context: sa.engine.ExceptionContext) -> None:
        error = context.sqlalchemy_exception
        # A constraint is the data's, "database is locked" another writer's
        # turn: the file is fine. Anything else may be the file.
        context.is_disconnect = (
            isinstance(error, sa.exc.DatabaseError)
            and not isinstance(error, sa.exc.IntegrityError)
            and "locked" not in str(context.original_exception)
        ) or context.is_disconnect

    sa.event.listen(engine, "connect", on_connect)
    sa.event.listen(engine, "checkout", on_checkout)
    sa.event.listen(engine, "handle_error", on_error)
    engine.dispose()  # connections made before know neither the wait nor their file
    return engine


def _postgresql_lock_timeout(lock_wait: float) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_connection: Any, _: Any) -> None:
        # Outside a transaction, or the pool's rollback would undo the SET.
        autocommit = dbapi_connection.autocommit
        dbapi_connection.autocommit = True
        cursor = dbapi_connection.cursor()
        cursor.execute(f"SET lock_timeout = {int(lock_wait * 1000)}")
        cursor.close()
        dbapi_connection.autocommit = autocommit

    return on_connect


def _sqlite_file(engine: sa.Engine) -> Path | None:
    """The file of a SQLite engine (URI or path), or None."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    if engine.url.query.get("mode") == "memory":
        return None
    return Path(database.removeprefix("file:"))


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def make_room(engine: sa.Engine) -> bool:
    """Make the folder of a SQLite file; whether the database is one."""
    if engine.dialect.name != "sqlite" or not engine.url.database:
        return False
    folder = Path(engine.url.database).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(
            f"cannot make the database's folder {folder}: {error.strerror or error} "
            "(give a writable --data-dir, or --database)"
        ) from error
    return True


def create_tables(engine: sa.Engine) -> None:
    """Create the shop's tables that are missing (``IF NOT EXISTS``: two
    processes making them at once both succeed)."""
    with engine.begin() as conn:
        for table in metadata.sorted_tables:
            conn.execute(sa.schema.CreateTable(table, if_not_exists=True))


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
    rows written by each batch. Returns the rows found missing. Several
    processes may create the same database at once: an item one of them
    wrote first is left as it is (every run makes the same items)."""
    if make_room(engine):
        with engine.connect() as conn:
            # Readers go on while a checkout writes (the setting stays with the file).
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")
    if reset:
        metadata.drop_all(engine)
    create_tables(engine)
    rng = random.Random(seed)
    with engine.connect() as conn:
        present = set(conn.scalars(sa.select(inventory.c.item_id)))
    if len(present) >= items and all(i in present for i in range(1, items + 1)):
        return 0  # a second run: nothing to make
    missing = []
    for item_id in range(1, items + 1):
        row = item(item_id, rng)  # drawn for every id: an item is the same on every run
        if item_id not in present:
            missing.append(row)
    adding = _insert_missing(engine)
    for at in range(0, len(missing), BATCH):
        # A transaction a batch, whose first statement writes: a concurrent
        # creator waits for the lock a batch long, and never writes from a
        # snapshot another one has moved past (SQLite refuses that at once).
        with engine.begin() as conn:
            conn.execute(adding, missing[at : at + BATCH])
        if progress is not None:
            progress(len(missing[at : at + BATCH]))
    return len(missing)


def _insert_missing(engine: sa.Engine) -> sa.Insert:
    """An INSERT of inventory rows that skips an id already there."""
    name = engine.dialect.name
    if name == "sqlite":
        return sqlite_insert(inventory).on_conflict_do_nothing()
    if name == "postgresql":
        return postgresql_insert(inventory).on_conflict_do_nothing()
    return inventory.insert()


BATCH = 5000  # rows per INSERT
