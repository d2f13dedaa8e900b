"""The shop benchmark runs end to end on a real server (a small inventory,
a fixed number of requests): its stacks start, take their turns and stop,
every row is reported, and the bench cleans up after itself, with either
load generator. wrk's replay of the loadgen model keeps each visitor's
cookies and CSRF tokens: its form posts are answered as a browser's are.
It never looks at a timing."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import sqlalchemy as sa

from benchmarks import shop
from benchmarks._wrk import replay, write_visits, wrk_path
from tests.helpers.cli import run_bench_cli
from webtier.demo import shopdb
from webtier.demo.loadgen import Traffic
from webtier.testing import RedisServer

pytestmark = [pytest.mark.needs_redis, pytest.mark.slow]

ROWS = [
    "shop mix, requests/s: webtier vs the book",
    "shop mix, requests/s: webtier vs SQL only",
    "shop mix, one worker's capacity: webtier vs the book",
    "shop mix, one worker's capacity: webtier vs SQL only",
    *(
        f"{route}, requests/s: webtier vs the book (SQL only in the note)"
        for route in (
            "GET /", "GET /item/{item_id}", "GET /cart", "POST /cart", "POST /login",
            "POST /checkout",
        )
    ),
    "Redis round trips per request",
    "SQL queries per 1,000 requests: webtier vs the book",
    "SQL queries per 1,000 requests: webtier vs SQL only",
    "app process CPU per request: webtier vs the book",
    "app process CPU per request: webtier vs SQL only",
    "Redis server CPU per request: webtier vs the book",
    "cached item page (X-Cache: HIT), time in the app, p99",
    "anonymous views of the top 10,000 items served without SQL",
    "item page views answered from the page cache, every visitor",
    "cached item page: Redis round trips",
    "cached item page with a logged-in visitor's parts filled (holes), time in the app, p99",
    "cached item page, filled: Redis round trips",
]  # fmt: skip
WRK_ROWS = [
    "shop mix, requests/s: webtier, two uvicorn workers vs one",
    "cached item page, wrk requests/s: the shop's /item/1 vs a bare Starlette page",
]
# Databases of the session's server that no other test uses: the bench
# needs N and N+1 empty and flushes them.
DB = 4
needs_wrk = pytest.mark.skipif(
    wrk_path() is None, reason="no wrk (scripts/check installs Debian's; CI has it)"
)


@pytest.mark.parametrize("load", [pytest.param("wrk", marks=needs_wrk), "python"])
def test_shop_bench_reports_every_row(
    servers: dict[str, RedisServer], tmp_path: Path, load: str
) -> None:
    # wrk: a fixed 15 responses per connection; the Python driver: 0.2 s.
    args = ["--seconds", "0.2", "--processes", "1,2", "--scale", "0.01", "--load", load]
    args += ["--requests", "15"] if load == "wrk" else []
    result, saved = run_bench_cli(servers["standalone"], DB, tmp_path, "shop", *args)
    rows = [*ROWS, *WRK_ROWS] if load == "wrk" else ROWS
    for row in rows:
        assert f"| {row} |" in result.stdout
    assert {row["what"] for row in saved["rows"]} == set(rows)
    served = {m["name"]: m["median"] for m in saved["measurements"] if m["unit"] == "req/s"}
    stacks = ["webtier", "book's listings", "SQL only"]
    for stack in [*stacks, "webtier, two workers"] if load == "wrk" else stacks:
        assert served[f"{stack}: all requests"] > 0
    assert not [note for note in saved["notes"] if "5xx" in note]
    assert any(note.startswith(f"load: {load}") for note in saved["notes"])


@needs_wrk
@pytest.mark.parametrize("stack", shop.STACKS)
def test_wrk_replay_posts_forms_with_their_cookies_and_tokens(tmp_path: Path, stack: str) -> None:
    """Every form post of the replay is accepted (a 303, as a browser's):
    a lost cookie or token would be refused (403). Checkouts may find an
    item out of stock (409)."""
    items = 300
    database = f"sqlite:///{tmp_path}/shop.db"
    engine = sa.create_engine(database)
    shopdb.create(engine, items)
    engine.dispose()
    write_visits(tmp_path / "visits", 2, Traffic(items=items, users=20), 7, 40)
    with RedisServer.start() as server, shop.running(stack, server.url, database, items) as s:
        s.signal(signal.SIGCONT)
        run = replay(s.base, tmp_path / "visits", 1, 2, limit=120)
    report = run.report
    assert report.requests == 240
    assert report.status("5xx") == report.transport_errors == 0
    forms = [r for r in report.routes if r.route.startswith("POST ") and "checkout" not in r.route]
    assert {"POST /cart", "POST /login"} <= {form.route for form in forms}
    for form in forms:
        assert form.statuses["3xx"] == form.requests > 0, form
    assert report.route("GET /orders/{order_id}") is not None  # a checkout went through
    assert report.visitors > report.returning_visitors > 0
