"""webtier.book's row cache (Listings 2.7 and 2.8), on any redis-py client."""

from __future__ import annotations

import threading
import time
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa

from tests.helpers.rows import db_row, seed
from webtier import book


def test_schedule_cache_rows_once_and_get_cached_row(conn: Any) -> None:
    inventory: dict[str, dict[str, Any]] = {
        "1": {"name": "lamp", "count": 5, "price": Decimal("19.90")},
        "2": {"name": "mug", "count": 0, "price": Decimal("4.50")},
    }
    asked: list[str] = []

    def get(row_id: str) -> dict[str, Any] | None:  # the book's Inventory.get
        asked.append(row_id)
        return inventory.get(row_id)

    book.schedule_row_cache(conn, 1, 5)
    book.schedule_row_cache(conn, "2", 5)
    report = book.cache_rows(conn, load=get, once=True)
    assert report is not None
    assert (report.claimed, report.stored) == (2, 2)
    assert sorted(asked) == ["1", "2"]  # ids come to the loader as text, as in the book
    assert book.get_cached_row(conn, 1) == inventory["1"]  # typed, never bytes
    assert book.get_cached_row(conn, 3) is None
    assert book.cache_rows(conn, load=get, once=True).claimed == 0  # type: ignore[union-attr]
    book.schedule_row_cache(conn, 1, 0)  # the book: unschedule and drop the copy
    assert book.get_cached_row(conn, 1) is None
    del inventory["2"]
    book.schedule_row_cache(conn, 2, 0.01)
    book.schedule_row_cache(conn, 2, 0)
    book.schedule_row_cache(conn, 2, 0.01)
    time.sleep(0.02)
    assert book.cache_rows(conn, load=get, once=True).removed == 1  # type: ignore[union-attr]
    assert book.get_cached_row(conn, 2) is None


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_cache_rows_takes_a_sql_source(conn: Any, database: sa.Engine) -> None:
    source = seed(database, 30)
    for item_id in range(1, 31):
        book.schedule_row_cache(conn, item_id, 60)
    report = book.cache_rows(conn, load=source, once=True)
    assert report is not None
    assert report.stored == 30
    assert book.get_cached_row(conn, 17) == db_row(database, 17)


def test_cache_rows_as_a_daemon(conn: Any) -> None:
    stock = {"count": 1}
    book.schedule_row_cache(conn, "hot", 0.05)
    stop = threading.Event()
    daemon = threading.Thread(
        target=book.cache_rows, args=(conn,), kwargs={"load": lambda _: dict(stock), "stop": stop}
    )
    daemon.start()
    try:
        deadline = time.monotonic() + 10
        while book.get_cached_row(conn, "hot") != {"count": 1}:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        stock["count"] = 2  # the flash sale's inventory changes; the copy follows
        while book.get_cached_row(conn, "hot") != {"count": 2}:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        stop.set()
        daemon.join(timeout=10)
    assert not daemon.is_alive()
