"""The page cache benchmark runs end to end on a real server (tiny sizes):
every row is reported, the stampede renders once, and the bench cleans up.
It never looks at a timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run_smoke
from webtier.testing import RedisServer

pytestmark = pytest.mark.needs_redis

ROWS = [
    "cache hit, item page, 1 client",
    "cache hit vs one bare GET, 1 client",
    "through uvicorn: hit vs uncached 20 ms render",
    "stampede: 200 concurrent requests to a cold page",
]
# Databases of the session's server that no other test uses: the bench
# needs N and N+1 empty and flushes them.
DB = 6


def test_pagecache_bench_reports_every_row(servers: dict[str, RedisServer], tmp_path: Path) -> None:
    saved = run_smoke(servers["standalone"], DB, tmp_path, "pagecache", ROWS, scale=1.0)
    stampede = next(m for m in saved["measurements"] if m["unit"] == "renders")
    assert stampede["values"] == [1.0]
