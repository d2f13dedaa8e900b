"""Helpers of the row cache tests: a seeded shop database, and real sources
instrumented to count, slow down or pause their loads."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from webtier import shopdb
from webtier.rowsource import Row, Source
from webtier.sqlsource import SqlSource


def seed(engine: sa.Engine, items: int = 50) -> SqlSource:
    """The shop's inventory with items 1..``items``, and its source."""
    shopdb.create(engine, items)
    return shopdb.inventory_source(engine)


def db_row(engine: sa.Engine, item_id: int) -> dict[str, Any] | None:
    """The row as the database has it now."""
    with engine.connect() as conn:
        found = conn.execute(
            sa.select(shopdb.inventory).where(shopdb.inventory.c.item_id == item_id)
        ).first()
    return None if found is None else dict(found._mapping)


def set_stock(engine: sa.Engine, item_id: int, stock: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            shopdb.inventory.update()
            .where(shopdb.inventory.c.item_id == item_id)
            .values(stock=stock)
        )


def delete_item(engine: sa.Engine, item_id: int) -> None:
    with engine.begin() as conn:
        conn.execute(shopdb.inventory.delete().where(shopdb.inventory.c.item_id == item_id))


class Instrumented(Source):
    """A real source, watched: counts its loads, and can sleep after each
    query or wait at a gate (to place another client's write between a
    load's read and its store)."""

    def __init__(self, inner: Source, *, pause: float = 0.0, gated: bool = False) -> None:
        super().__init__(inner.name)
        self.inner = inner
        self.pause = pause
        self.loads = 0
        self.read = threading.Event()  # set once a load has queried
        self.gate = threading.Event()  # loads wait for it after querying
        if not gated:
            self.gate.set()
        self._lock = threading.Lock()

    def key(self, row_id: object) -> str:
        return self.inner.key(row_id)

    def load(self, keys: Sequence[str]) -> dict[str, Row]:
        rows = self.inner.load(keys)
        with self._lock:
            self.loads += 1
        if self.pause:
            time.sleep(self.pause)
        self.read.set()
        if not self.gate.wait(30):
            raise TimeoutError("the test never opened the gate")
        return rows
