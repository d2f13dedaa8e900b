"""The statistics benchmark runs end to end on a real server (tiny sizes).

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
    "update_stats",
    "server CPU per update",
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
    server = servers["standalone"]
    url = f"redis://127.0.0.1:{server.port}/{DB}"
    out = tmp_path / "stats.json"
    args = ["stats", "--url", url, "--seconds", "0.2", "--repeat", "1"]
    args += ["--processes", "1,2", "--scale", "0.05", "--json", str(out), "--markdown"]

    result = CliRunner().invoke(bench, args)

    assert result.exit_code == 0, result.output
    for row in ROWS:
        assert f"| {row} |" in result.stdout
    saved = json.loads(out.read_text())
    assert {row["what"] for row in saved["rows"]} == set(ROWS)
    assert {row["clients"] for row in saved["rows"] if row["what"] == "update_stats"} == {1, 2}
    for db in (DB, DB + 1):  # flushed on the way out
        client = server.client(db=db)
        try:
            assert client.dbsize() == 0
        finally:
            client.close()
