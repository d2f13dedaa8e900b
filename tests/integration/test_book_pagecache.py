"""webtier.book's page cache functions, as the book's own test uses them."""

from __future__ import annotations

from typing import Any

from webtier import book


def callback(request: str) -> str:
    return "content for " + request


def test_cache_request_as_in_the_book(conn: Any) -> None:
    book.tier_for(conn).ranking.record_view("itemX")
    url = "http://test.com/?item=itemX"
    assert book.can_cache(conn, url)
    assert book.cache_request(conn, url, callback) == callback(url)
    # Cached: the callback is not called again.
    assert book.cache_request(conn, url, None) == callback(url)  # type: ignore[arg-type]
    assert not book.can_cache(conn, "http://test.com/")
    assert not book.can_cache(conn, "http://test.com/?item=itemX&_=1234536")


def test_pages_not_cached_are_rendered_every_time(conn: Any) -> None:
    calls: list[str] = []

    def counted(request: str) -> str:
        calls.append(request)
        return callback(request)

    never_viewed = "http://test.com/?item=itemY"
    dynamic = "http://test.com/?item=itemX&_=1"
    book.tier_for(conn).ranking.record_view("itemX")
    assert not book.can_cache(conn, never_viewed)
    for url in (never_viewed, never_viewed, dynamic, dynamic):
        assert book.cache_request(conn, url, counted) == callback(url)
    assert len(calls) == 4
