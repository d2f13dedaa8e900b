"""webtier.book's session and cart functions, with the book's uuid4 tokens."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from tests.helpers.servers import all_keys
from webtier import book


def _token() -> str:
    return str(uuid.uuid4())  # as the book issues them


def test_update_token_creates_and_check_token_reads(conn: Any) -> None:
    token = _token()
    assert book.check_token(conn, token) is None
    book.update_token(conn, token, "alice")
    assert book.check_token(conn, token) == "alice"
    # The book's update_token records whatever user it is given.
    book.update_token(conn, token, "bob", "item:1")
    assert book.check_token(conn, token) == "bob"


def test_viewed_items_keep_the_newest_25(conn: Any) -> None:
    token = _token()
    for n in range(30):
        book.update_token(conn, token, "alice", f"item:{n}")
    book.update_token(conn, token, "alice", "item:10")
    viewed = book.recently_viewed(conn, token)
    assert viewed == ["item:10", *[f"item:{n}" for n in range(29, 4, -1) if n != 10]]
    assert all(type(item) is str for item in viewed)


def test_carts_add_remove_and_read(conn: Any) -> None:
    session = _token()
    book.add_to_cart(conn, session, "item:1", 3)
    book.add_to_cart(conn, session, "item:2", 1)
    book.add_to_cart(conn, session, "item:2", 0)
    cart = book.get_cart(conn, session)
    assert cart == {"item:1": 3}
    assert all(type(count) is int for count in cart.values())


@pytest.mark.parametrize("cleaner", [book.clean_sessions, book.clean_full_sessions])
def test_cleaners_keep_the_newest_with_limit_and_once(
    conn: Any, redis_url: str, cleaner: Any
) -> None:
    tokens = [_token() for _ in range(12)]
    for n, token in enumerate(tokens):
        book.update_token(conn, token, f"user{n}", "item:1")
        book.add_to_cart(conn, token, "item:1", 1)
    cleaner(conn, limit=5, once=True)
    alive = [book.check_token(conn, t) is not None for t in tokens]
    assert alive == [False] * 7 + [True] * 5
    assert book.get_cart(conn, tokens[0]) == {}
    assert book.recently_viewed(conn, tokens[0]) == []
    assert len(all_keys(redis_url, "webtier:{s:*}:t:*")) == 5


def test_the_cleaner_runs_as_a_daemon_until_stopped(conn: Any) -> None:
    tokens = [_token() for _ in range(4)]
    for token in tokens:
        book.update_token(conn, token, "u")
    stop = threading.Event()
    daemon = threading.Thread(target=book.clean_sessions, args=(conn, 1), kwargs={"stop": stop})
    daemon.start()
    try:
        # The first pass runs at once; wait for it by polling the outcome.
        for _ in range(200):
            if sum(book.check_token(conn, t) is not None for t in tokens) == 1:
                break
            threading.Event().wait(0.05)
    finally:
        stop.set()
        daemon.join(timeout=30)
    assert not daemon.is_alive()
    assert [book.check_token(conn, t) is not None for t in tokens] == [False] * 3 + [True]
