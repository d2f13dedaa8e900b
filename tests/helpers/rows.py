"""The row cache's tests' database: the demo shop's inventory seeded,
read and written behind the cache's back, a load taken and never stored,
and a source watched (:class:`Instrumented`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from tests.helpers.servers import run_script
from webtier._core.keys import shard_of
from webtier._core.protocol import ScriptCall, text
from webtier.config import Config
from webtier.demo import shopdb
from webtier.rows import Row, Source
from webtier.rows.ops import FILL, bookkeeping_ms, nonce
from webtier.rows.sql import SqlSource


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


def take_load(
    redis_url: str, config: Config, key: str, lease_ms: int, source: str = shopdb.SHOP_INVENTORY
) -> str:
    """Take the load of row ``key`` of ``source`` as a reader would, then
    never store: the reader died (or stalls). Returns its ticket."""
    shard = config.keys.row_shard(source, shard_of(key, config.rows.shards))
    keys = (shard.fill, shard.lease, shard.seq, shard.row(key))
    args = (key, lease_ms, "miss", bookkeeping_ms(config.rows), nonce())
    kind, ticket = run_script(redis_url, ScriptCall(FILL, keys, args))
    assert kind == b"load"
    return text(ticket)


class Instrumented(Source):
    """A real source, watched: counts its loads, and can sleep after each
    query or wait at a gate (to place another client's write between a
    load's read and its store)."""

    def __init__(self, inner: Source, *, pause: float = 0.0, gated: bool = False) -> None:
        super().__init__(inner.name)
        self.inner = inner
        self.pause = pause
        self.loads = 0
        self.loaded: list[str] = []  # the keys of every load, in order
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
            self.loaded += keys
        if self.pause:
            time.sleep(self.pause)
        self.read.set()
        if not self.gate.wait(30):
            raise TimeoutError("the test never opened the gate")
        return rows
