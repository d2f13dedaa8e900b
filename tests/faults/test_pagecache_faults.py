"""Races the fault matrix found in the page cache, each replayed
deterministically: a page stored during an invalidation of its item, and a
claim sent again after its reply was lost."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.test import Client

import webtier
from tests.faults.workloads import Catalog, wsgi_app
from tests.helpers.servers import stall
from webtier import pagecache
from webtier._core.protocol import Call
from webtier.config import Config, PageCacheSettings, RetryPolicy
from webtier.pagecache import CacheRoute, PageRequest, PageRules
from webtier.testing import RedisServer
from webtier.types import Rendered

pytestmark = pytest.mark.faults


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer.start() as running:
        yield running


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
    op = pagecache.invalidation.invalidate_item(tier.config, "42")
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


def resumed(op: Any, replies: Any) -> Any:
    """The rest of ``op``, once ``replies`` answered its first step, as an
    operation of its own (errors thrown into it go on into ``op``)."""
    try:
        step = op.send(replies)
        while True:
            try:
                answer = yield step
            except Exception as error:
                step = op.throw(error)
            else:
                step = op.send(answer)
    except StopIteration as done:
        return done.value


def test_a_claim_whose_reply_was_lost_still_renders_and_stores(server: RedisServer) -> None:
    # The lookup answers (a miss); then the server stalls while the claim is
    # sent: its reply is lost, it is sent again (it is idempotent), and the
    # server runs both once it resumes. Under CLIENT KILL storms the matrix
    # sees this as a page cache that takes up to lock_wait to recover.
    settings = PageCacheSettings(lock_wait=2.0)
    config = Config(
        prefix="claim",
        pagecache=settings,
        retry=RetryPolicy(attempts=10, backoff=0.1, backoff_cap=0.3),
    )
    client = webtier.connect(server.url, socket_timeout=0.3)
    tier = webtier.WebTier(client, config)
    rules = PageRules(routes=(CacheRoute("/*"),))
    body = b"a page"
    render = Call(lambda: Rendered(200, (("content-length", str(len(body))),), body, 300.0))
    warm = rules.plan(config, PageRequest.from_url("http://shop.test/warm"))
    assert warm is not None
    assert (
        tier.transport.run(pagecache.ops.serve(config, warm, render)).page is not None
    )  # scripts loaded
    plan = rules.plan(config, PageRequest.from_url("http://shop.test/"))
    assert plan is not None
    op = pagecache.ops.serve(config, plan, render)
    replies = tier.transport.exchange(next(op))  # the lookup: a miss
    sleeper = stall(server, 1.0)
    began = time.monotonic()
    served = tier.transport.run(resumed(op, replies))
    took = time.monotonic() - began
    sleeper.join()
    webtier.disconnect(client)
    assert served.page is not None, f"rendered uncached after {took:.1f} s"
