"""The counters benchmark runs end to end on a real server (tiny sizes).

It checks that every row is reported and that the bench cleans up after
itself; it never looks at a timing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from webtier.bench.cli import bench
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
    server = servers["standalone"]
    url = f"redis://127.0.0.1:{server.port}/{DB}"
    out = tmp_path / "counters.json"
    args = ["counters", "--url", url, "--seconds", "0.2", "--repeat", "1"]
    args += ["--processes", "1,2", "--scale", "0.01", "--json", str(out), "--markdown"]

    result = CliRunner().invoke(bench, args)

    assert result.exit_code == 0, result.output
    for row in ROWS:
        assert f"| {row} |" in result.stdout
    saved = json.loads(out.read_text())
    assert {row["what"] for row in saved["rows"]} == set(ROWS)
    assert {row["clients"] for row in saved["rows"] if row["what"] == "record, unbatched"} == {
        1,
        2,
    }
    for db in (DB, DB + 1):  # flushed on the way out
        client = server.client(db=db)
        try:
            assert client.dbsize() == 0
        finally:
            client.close()
