"""The sessions benchmark runs end to end on a real server (tiny sizes), and
its bulk loader leaves sessions exactly as the API makes them.

It never looks at a timing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import webtier
from benchmarks import _session_workloads as w
from tests.helpers.cli import run_smoke
from webtier.testing import RedisServer

pytestmark = pytest.mark.needs_redis

ROWS = [
    "touch with an item",
    "server CPU per touch",
    "check",
    "cleanup",
    "memory per session",
]
# Databases of the session's server that no other test uses: the bench
# needs N and N+1 empty and flushes them.
DB = 10


def test_sessions_bench_reports_every_row(servers: dict[str, RedisServer], tmp_path: Path) -> None:
    run_smoke(servers["standalone"], DB, tmp_path, "sessions", ROWS, scale=0.005)


def test_the_bulk_loader_leaves_what_the_api_reads(servers: dict[str, RedisServer]) -> None:
    server = servers["standalone"]
    url = f"redis://127.0.0.1:{server.port}/{DB}"
    client = server.client(db=DB)
    try:
        w.load_webtier(url, 3)
        tier = webtier.WebTier(client, webtier.Config(sessions=w.settings()))
        (session,) = tier.sessions.of_user("user:1")
        assert session.user == "user:1"
        keys = list(client.scan_iter(match="webtier:*:t:*"))
        assert len(keys) == 3
        token = next(k.decode().rsplit(":", 1)[1] for k in keys if client.hget(k, "u") == b"user:1")
        assert tier.sessions.check(token) == "user:1"
        newest = w._viewed(1, w.HELD)[::-1]
        assert tier.sessions.recently_viewed(token) == newest[: w.VIEWED]
        assert tier.carts.get(token) == dict(w.CART)
        # The API goes on from there: one more view trims the session.
        assert tier.sessions.touch(token, item="item:new")
        assert tier.sessions.recently_viewed(token) == ["item:new", *newest[: w.VIEWED - 1]]
        assert client.hlen(next(k for k in keys if client.hget(k, "u") == b"user:1")) == 3 + 6 + 25
        assert w.webtier_sessions(url) == 3
    finally:
        client.flushdb()
        client.close()


FRAMEWORK_ROWS = [
    f"{framework}: {what}"
    for framework in ("Django", "Flask", "Starlette")
    for what in (
        "round trips per request",
        "round trips per request that changes nothing",
        "requests/s",
    )
]


def test_the_frameworks_bench_reports_every_row(
    servers: dict[str, RedisServer], tmp_path: Path
) -> None:
    # A process of its own: the bench configures Django's settings, which
    # other tests' Django apps configure their own way.
    url = f"redis://127.0.0.1:{servers['standalone'].port}/{DB}"
    out = tmp_path / "frameworks.json"
    line = ["bench", "sessions", "--frameworks", "--url", url, "--seconds", "0.1"]
    line += ["--repeat", "1", "--json", str(out), "--markdown"]
    done = subprocess.run(
        [sys.executable, "-m", "webtier", *line], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    for row in FRAMEWORK_ROWS:
        assert f"| {row} |" in done.stdout
    saved = json.loads(out.read_text())
    assert [row["what"] for row in saved["rows"]] == FRAMEWORK_ROWS
    # The round trips are counted, not timed: every side sends some.
    trips = [row for row in saved["rows"] if row["what"].endswith("round trips per request")]
    assert all(row["webtier"] > 0 and row["book"] > 0 for row in trips)
    assert_bench_databases_empty(servers["standalone"])


def assert_bench_databases_empty(server: RedisServer) -> None:
    """The bench flushed the two databases it used."""
    for number in (DB, DB + 1):
        client = server.client(db=number)
        try:
            assert client.dbsize() == 0
        finally:
            client.close()


SERVED_ROWS = [
    f"{framework} served: {what}"
    for framework in ("Django", "Flask", "Starlette")
    for what in (
        "round trips per request",
        "round trips per request that changes nothing",
        "requests/s",
        "app server CPU µs/request",
        "Redis CPU µs/request",
    )
]


@pytest.mark.skipif(shutil.which("wrk") is None, reason="no wrk (apt-get install wrk)")
def test_the_served_frameworks_bench_drives_real_servers_with_wrk(
    servers: dict[str, RedisServer], tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{servers['standalone'].port}/{DB}"
    out = tmp_path / "served.json"
    line = ["bench", "sessions", "--frameworks", "--served", "--url", url, "--seconds", "1"]
    line += ["--repeat", "1", "--json", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "webtier", *line], capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [row["what"] for row in rows] == SERVED_ROWS
    # Each side served requests with its session (the bench checks the counter
    # went up), and the framework alone was measured beside them.
    for row in rows:
        assert row["webtier"] > 0
        assert row["book"] > 0
        if row["what"].endswith(("requests/s", "app server CPU µs/request")):
            assert row["raw_limit"] > 0
    # Round trips are counted exactly: the anchors' read and write (Django's
    # cache backend reads once more before its write).
    assert [row["book"] for row in rows if row["what"].endswith("round trips per request")] == [
        3,
        2,
        2,
    ]
    assert_bench_databases_empty(servers["standalone"])
