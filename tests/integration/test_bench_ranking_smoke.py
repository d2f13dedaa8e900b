"""The ranking benchmark runs end to end on a real server (tiny sizes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_smoke
from webtier.testing import RedisServer

pytestmark = pytest.mark.needs_redis

ROWS = [
    "views, direct ZINCRBY",
    "views, aggregated",
    "admission, cached top N",
    "admission, ZREVRANK per request",
    "rescale, one pass",
]
DB = 8  # with 9: used by no other test


def test_ranking_bench_reports_every_row(servers: dict[str, RedisServer], tmp_path: Path) -> None:
    saved = run_smoke(servers["standalone"], DB, tmp_path, "ranking", ROWS, scale=0.01)
    for what in ROWS[:-1]:
        assert {row["clients"] for row in saved["rows"] if row["what"] == what} == {1, 2}
