"""Races the fault matrix found in code its author does not own, each
replayed deterministically. Marked xfail (strict) until fixed: a fix turns
it into a failure that asks for the mark to go."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from werkzeug.test import Client

import webtier
from tests.faults.workloads import Catalog, wsgi_app
from webtier._ops import pagecache
from webtier.config import Config
from webtier.testing import RedisServer

pytestmark = pytest.mark.faults


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer.start() as running:
        yield running


@pytest.mark.xfail(
    strict=True,
    reason="invalidate_item's second round trip deletes the item's whole page index, "
    "including pages stored after its first one: later invalidations miss them",
)
def test_a_page_stored_during_invalidate_item_is_dropped_by_the_next(server: RedisServer) -> None:
    client = webtier.connect(server.url)
    tier = webtier.WebTier(client, Config(prefix="race"))
    tier.ranking.record_view("42")  # item pages of 42 are admitted
    catalog = Catalog()
    http = Client(wsgi_app(tier, catalog), use_cookies=False)

    def page() -> tuple[str, str | None]:
        response = http.get("/item?item=42", base_url="http://shop.test")
        return response.get_data(as_text=True), response.headers.get("x-cache")

    catalog.version = 1
    assert page() == ("item 42 v1", "MISS")
    # v2 written and invalidated: nothing cached now.
    catalog.version = 2
    tier.pagecache.invalidate_item("42")
    # v3 written; its invalidate_item is cut between its two round trips (the
    # generation bump and index read, then the deletes) by a request that
    # renders v3 and stores it under the new generation.
    catalog.version = 3
    op = pagecache.invalidate_item(tier.config, "42")
    replies = tier.transport.exchange(next(op))
    assert page() == ("item 42 v3", "MISS")
    with contextlib.suppress(StopIteration):
        while True:
            replies = tier.transport.exchange(op.send(replies))
    # v4 written and invalidated: no page of v3 may be served any more.
    catalog.version = 4
    tier.pagecache.invalidate_item("42")
    assert page() == ("item 42 v4", "MISS")  # fails: ("item 42 v3", "HIT") for up to its TTL
    webtier.disconnect(client)
