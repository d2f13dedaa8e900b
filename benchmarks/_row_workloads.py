"""Workloads and data sets of the row cache benchmark.

Workloads are module-level context managers taking URLs, so that
``functools.partial(workload, ...)`` pickles into a worker process, where
it opens clients of its own.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from benchmarks import book
from benchmarks._counter_workloads import client_on, tier_on
from benchmarks._loops import Loop
from webtier.demo import shopdb

READS_PER_STEP = 10
READ_IDS = tuple(range(1, 101))  # the rows read, cycled over; all cached


def engine_on(url: str) -> sa.Engine:
    return sa.create_engine(url)


@contextlib.contextmanager
def webtier_get(redis_url: str, db_url: str) -> Iterator[Loop]:
    """``tier.rows.get(inventory, id)``: a cached row, decoded to its types."""
    source = shopdb.inventory_source(db_url)  # hits never touch the database
    with tier_on(redis_url) as tier:
        get = tier.rows.get
        for item_id in READ_IDS:  # cached before the timed run
            if get(source, item_id, load=True) is None:
                raise RuntimeError(f"item {item_id} is missing from the database")
        turns = itertools.cycle(READ_IDS)

        def step() -> None:
            for item_id in itertools.islice(turns, READS_PER_STEP):
                get(source, item_id)

        yield Loop(step, READS_PER_STEP)
    source.dispose()


def _select_loop(db_url: str, select: Any) -> Iterator[Loop]:
    engine = engine_on(db_url)
    try:
        turns = itertools.cycle(READ_IDS)

        def step() -> None:
            for item_id in itertools.islice(turns, READS_PER_STEP):
                with engine.connect() as conn:
                    dict(select(conn, item_id)._mapping)

        step()  # warms the pool and SQLAlchemy's statement cache
        yield Loop(step, READS_PER_STEP)
    finally:
        engine.dispose()


@contextlib.contextmanager
def select_prepared(db_url: str) -> Iterator[Loop]:
    """A primary-key SELECT through SQLAlchemy Core, the statement built once
    with a bound parameter: SQLAlchemy's fastest path."""
    inv = shopdb.inventory
    statement = sa.select(inv).where(inv.c.item_id == sa.bindparam("item_id"))
    yield from _select_loop(db_url, lambda conn, i: conn.execute(statement, {"item_id": i}).one())


@contextlib.contextmanager
def select_core(db_url: str) -> Iterator[Loop]:
    """The same SELECT as applications write it, built at each call
    (SQLAlchemy caches its compilation)."""
    inv = shopdb.inventory
    yield from _select_loop(
        db_url, lambda conn, i: conn.execute(sa.select(inv).where(inv.c.item_id == i)).one()
    )


# -- the refresh data set and the book's loop --------------------------------------------


def seed(db_url: str, items: int) -> None:
    engine = engine_on(db_url)
    try:
        shopdb.create(engine, items, reset=True)
    finally:
        engine.dispose()


def book_inventory_get(engine: sa.Engine) -> Any:
    """The book's ``Inventory.get(row_id)``: one primary-key SELECT a row."""
    inv = shopdb.inventory

    def get(row_id: str) -> dict[str, Any] | None:
        with engine.connect() as conn:
            found = conn.execute(sa.select(inv).where(inv.c.item_id == int(row_id))).first()
        return None if found is None else dict(found._mapping)

    return get


def book_schedule_all(url: str, items: int, delay: float) -> None:
    with client_on(url, decode_responses=True) as conn:
        for item_id in range(1, items + 1):
            book.schedule_row_cache(conn, str(item_id), delay)


def book_cached_rows(url: str) -> int:
    with client_on(url, decode_responses=True) as conn:
        return sum(1 for _ in conn.scan_iter(match="inv:*", count=1000))
