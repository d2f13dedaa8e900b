"""The statistics benchmark runs end to end on a real server (tiny sizes).

It checks that every row is reported and that the bench cleans up after
itself; it never looks at a timing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run_smoke
from webtier.testing import RedisServer

pytestmark = pytest.mark.needs_redis

ROWS = [
    "update_stats",
    "update_stats, batched",
    "server CPU per update",
    "server CPU per update, batched",
    "access_time, empty block",
    "histograms on / off",
    "slowest, exact",
    "memory per context and hour, histograms off",
    "memory per context and hour, histograms on",
]
# Databases of the session's server that no other test uses: the bench
# needs N and N+1 empty and flushes them.
DB = 12


def test_stats_bench_reports_every_row(servers: dict[str, RedisServer], tmp_path: Path) -> None:
    saved = run_smoke(servers["standalone"], DB, tmp_path, "stats", ROWS, scale=0.05)
    for what in ("update_stats", "update_stats, batched"):
        assert {row["clients"] for row in saved["rows"] if row["what"] == what} == {1, 2}
