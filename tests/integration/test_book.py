"""webtier.book: the book's functions, on any redis-py client."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import webtier
from webtier import book

NOW = 1_700_000_000


def test_update_and_get_counter(conn: Any) -> None:
    book.update_counter(conn, "hits", now=NOW)
    book.update_counter(conn, "hits", 4, now=NOW + 1)
    samples = book.get_counter(conn, "hits", 1)
    assert samples == [(NOW, 1), (NOW + 1, 4)]
    assert all(type(a) is int and type(b) is int for a, b in samples)
    assert book.get_counter(conn, "hits", 86400) == [(NOW - NOW % 86400, 5)]


def test_clean_counters_once_and_as_a_daemon(conn: Any) -> None:
    book.update_counter(conn, "old", now=NOW)  # long past: every slice is stale
    book.clean_counters(conn, once=True)
    assert book.get_counter(conn, "old", 1) == []
    assert book.get_counter(conn, "old", 86400) == []
    stop = threading.Event()
    daemon = threading.Thread(target=book.clean_counters, args=(conn,), kwargs={"stop": stop})
    daemon.start()
    time.sleep(0.3)
    assert daemon.is_alive()
    stop.set()
    daemon.join(timeout=10)
    assert not daemon.is_alive()


def test_one_tier_per_client(conn: Any) -> None:
    assert book.tier_for(conn) is book.tier_for(conn)


def test_async_clients_are_refused_clearly(redis_url: str) -> None:
    client = webtier.connect_async(redis_url)
    with pytest.raises(webtier.ConfigError, match="sync redis-py client"):
        book.update_counter(client, "x")
