"""The sessions benchmark runs end to end on a real server (tiny sizes), and
its bulk loader leaves sessions exactly as the API makes them.

It never looks at a timing.
"""

from __future__ import annotations

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
