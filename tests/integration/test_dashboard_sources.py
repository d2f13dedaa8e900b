"""What #16 added for the dashboard to see, each where it is made: the row
cache's refresh lag, a worker's last step in its heartbeat, the session
cleaner's removals and the page cache's renders as counters."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import webtier
from tests.helpers.servers import wait_for
from webtier.config import Config, RowSettings, SessionSettings
from webtier.pagecache import CacheRoute, PageRules
from webtier.rows import FunctionSource
from webtier.web import pagecache
from webtier.workers import JOBS, SESSIONS_CLEANED, Worker

pytestmark = pytest.mark.needs_redis

SOURCE = FunctionSource("stock", lambda key: {"id": key})


@pytest.fixture
def tier(redis_url: str, prefix: str) -> Iterator[webtier.WebTier]:
    client = webtier.connect(redis_url)
    config = Config(
        prefix=prefix,
        rows=RowSettings(sources=(SOURCE,)),
        sessions=SessionSettings(limit=2),
    )
    yield webtier.WebTier(client, config)
    webtier.disconnect(client)


def total(tier: webtier.WebTier, counter: str) -> int:
    return sum(count for _, count in tier.counters.get(counter, 86400))


def test_the_refresh_lag_is_how_long_the_most_overdue_row_waited(tier: webtier.WebTier) -> None:
    assert tier.rows.status(SOURCE).overdue == 0.0
    tier.rows.schedule(SOURCE, 1, 60)  # due at once
    time.sleep(0.3)
    status = tier.rows.status(SOURCE)
    assert status.due == 1
    assert 0.2 < status.overdue < 30
    tier.rows.refresh_due([SOURCE])
    assert tier.rows.status(SOURCE).overdue == 0.0  # next due in a minute


@pytest.mark.slow  # a worker settles before its first step
def test_a_heartbeat_tells_the_last_step_and_the_cleaner_counts_its_removals(
    tier: webtier.WebTier,
) -> None:
    for _ in range(5):
        tier.sessions.new()
    worker = Worker(tier, [JOBS["sessions"]], heartbeat=0.1)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: total(tier, SESSIONS_CLEANED) == 3, "3 removals counted")
        wait_for(
            lambda: [w.last_job for w in tier.workers.alive()] == ["sessions"], "the last step"
        )
        (info,) = tier.workers.alive()
        assert info.last_outcome.startswith("3 sessions removed")
        assert time.time() - 10 < info.last_step <= time.time()
    finally:
        worker.request_stop()
        thread.join(10)


@pytest.mark.anyio
async def test_the_page_cache_counts_renders_apart_from_misses(redis_url: str, prefix: str) -> None:
    async def page(request: Request) -> PlainTextResponse:
        return PlainTextResponse("a page", headers={"Cache-Control": "max-age=60"})

    client = webtier.connect_async(redis_url)
    tier = webtier.AsyncWebTier(client, Config(prefix=prefix))
    app = pagecache.ASGIMiddleware(
        Starlette(routes=[Route("/p", page)]), tier, PageRules(routes=(CacheRoute("/p"),))
    )
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop") as http:
            for _ in range(3):
                assert (await http.get("/p")).status_code == 200
        await app.aclose()
        counts = {
            name: sum(c for _, c in await tier.counters.get(f"pagecache:{name}", 86400))
            for name in ("hit", "miss", "render")
        }
    finally:
        await client.aclose()
    assert counts == {"hit": 2, "miss": 1, "render": 1}
