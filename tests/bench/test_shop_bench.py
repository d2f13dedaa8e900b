"""The shop benchmark runs end to end on a real server (a small inventory,
runs of a fraction of a second): its three stacks start, take their turns
and stop, every row is reported, and the bench cleans up after itself. It
never looks at a timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run_smoke
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
]  # fmt: skip
# Databases of the session's server that no other test uses: the bench
# needs N and N+1 empty and flushes them.
DB = 4


def test_shop_bench_reports_every_row(servers: dict[str, RedisServer], tmp_path: Path) -> None:
    saved = run_smoke(servers["standalone"], DB, tmp_path, "shop", ROWS, scale=0.01)
    served = {m["name"]: m["median"] for m in saved["measurements"] if m["unit"] == "req/s"}
    for stack in ("webtier", "book's listings", "SQL only"):
        assert served[f"{stack}: all requests"] > 0
    assert not [note for note in saved["notes"] if "5xx" in note]
