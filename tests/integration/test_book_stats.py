"""webtier.book's statistics functions, on any redis-py client."""

from __future__ import annotations

import statistics
import time
from typing import Any

import pytest

from webtier import book

pytestmark = pytest.mark.usefixtures("steady_hour")


def test_update_stats_returns_count_sum_and_sumsq(conn: Any) -> None:
    assert book.update_stats(conn, "ProfilePage", "AccessTime", 0.5) == [1, 0.5, 0.25]
    count, total, sumsq = book.update_stats(conn, "ProfilePage", "AccessTime", 1.5)
    assert (type(count), type(total), type(sumsq)) == (int, float, float)
    assert (count, total, sumsq) == (2, 2.0, pytest.approx(2.5))


def test_get_stats_is_the_books_dict(conn: Any) -> None:
    values = [3.0, 4.0, 8.0]
    for value in values:
        book.update_stats(conn, "Checkout", "Items", value)
    stats = book.get_stats(conn, "Checkout", "Items")
    assert set(stats) == {"min", "max", "count", "sum", "sumsq", "average", "stddev"}
    assert (stats["min"], stats["max"], stats["count"], stats["sum"]) == (3.0, 8.0, 3, 15.0)
    assert stats["sumsq"] == pytest.approx(89.0)
    assert stats["average"] == pytest.approx(5.0)
    assert stats["stddev"] == pytest.approx(statistics.stdev(values))
    empty = book.get_stats(conn, "Nothing", "Items")
    assert (empty["count"], empty["average"]) == (0, None)


def test_access_time_records_even_when_the_block_raises(conn: Any) -> None:
    with book.access_time(conn, "/slow"):
        time.sleep(0.03)

    def fail() -> None:
        with book.access_time(conn, "/broken"):
            raise ValueError("the view failed")

    with pytest.raises(ValueError, match="the view failed"):
        fail()
    assert book.get_stats(conn, "/broken", "AccessTime")["count"] == 1
    slowest = book.slowest(conn, 10)
    assert [context for context, _ in slowest] == ["/slow", "/broken"]
    assert all(type(c) is str and type(s) is float for c, s in slowest)
    assert book.slowest(conn, 1) == slowest[:1]


def test_process_view_times_the_callback_under_its_path(conn: Any) -> None:
    assert book.process_view(conn, lambda: "<html>", path="/item/{id}") == "<html>"
    assert book.get_stats(conn, "/item/{id}", "AccessTime")["count"] == 1
