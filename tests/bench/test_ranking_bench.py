"""The ranking benchmark runs end to end on a real server (tiny sizes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run_smoke
from webtier.testing import RedisServer

pytestmark = pytest.mark.needs_redis

ROWS = [
    "views, direct ZINCRBY",
    "views, aggregated",
    "admission, cached top N",
    "admission, ZREVRANK per request",
    "rescale, one pass",
    "views, shards vs one key",
    "rank, shards vs one key",
    "top 100, shards vs one key",
    "top 10,000, shards vs one key",
]
DB = 8  # with 9: used by no other test


def test_ranking_bench_reports_every_row(servers: dict[str, RedisServer], tmp_path: Path) -> None:
    saved = run_smoke(servers["standalone"], DB, tmp_path, "ranking", ROWS, scale=0.01)
    for what in [*ROWS[:4], *ROWS[5:7]]:  # the rows measured with 1 and N processes
        assert {row["clients"] for row in saved["rows"] if row["what"] == what} == {1, 2}
