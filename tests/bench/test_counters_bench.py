"""The counters benchmark runs end to end on a real server (tiny sizes).

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
    "record, unbatched",
    "redis-benchmark limit",
    "record, batched (recorder)",
    "get, 120 samples",
    "clean, one pass",
    "memory per retained sample",
]
# Databases of the session's server that no other test uses: the bench
# needs N and N+1 empty and flushes them.
DB = 14


def test_counters_bench_reports_every_row(servers: dict[str, RedisServer], tmp_path: Path) -> None:
    saved = run_smoke(servers["standalone"], DB, tmp_path, "counters", ROWS, scale=0.01)
    assert {row["clients"] for row in saved["rows"] if row["what"] == "record, unbatched"} == {1, 2}
