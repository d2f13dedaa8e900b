"""The transport benchmark runs end to end on a real server (tiny sizes).

It checks that every row and the table of clients are reported and that
the bench cleans up after itself; it never looks at a timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run_bench_cli
from webtier.testing import RedisServer

pytestmark = pytest.mark.needs_redis

ROWS = {
    "EVALSHA round trip (asyncio)",
    "EVALSHA round trip (uvloop)",
    "touch with an item",
    "counters.record",
    "stats.record",
}
DB = 6  # with 7: the page cache bench's too, never at the same time


def test_transport_bench_reports_every_row(servers: dict[str, RedisServer], tmp_path: Path) -> None:
    result, saved = run_bench_cli(
        servers["standalone"], DB, tmp_path, "transport", "--scale", "0.02"
    )
    assert {row["what"] for row in saved["rows"]} == ROWS
    for what in ROWS:
        assert {row["clients"] for row in saved["rows"] if row["what"] == what} == {1, 16}
    (table,) = saved["tables"]
    assert {record["client"] for record in table["records"]} == {
        "redis-py asyncio, one command",
        "redis-py asyncio, one-command pipeline",
        "redis-py sync client on the loop",
        "webtier's transport",
    }
    assert len(table["records"]) == 4 * 2 * 2  # clients x tasks x event loops
    assert "| EVALSHA round trip (asyncio) |" in result.stdout
