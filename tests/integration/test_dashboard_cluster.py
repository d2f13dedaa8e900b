"""``webtier dashboard --url`` against the suite's Redis Cluster: the
command serves every panel's API and /metrics from data spread over the
cluster's slots."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import webtier
from webtier.config import ACCESS_TIME
from webtier.testing import RedisCluster, free_port

pytestmark = [pytest.mark.needs_redis, pytest.mark.slow]

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def served(cluster: RedisCluster, prefix: str) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = [sys.executable, "-m", "webtier", "--url", cluster.url, "--prefix", prefix]
    base = f"http://127.0.0.1:{port}"
    with subprocess.Popen(
        [*command, "dashboard", "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(f"{base}/api/settings", timeout=1)
                    break
                except httpx.TransportError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise AssertionError(f"no dashboard on {base}") from None
                    time.sleep(0.1)
            yield base
        finally:
            process.terminate()
            process.wait(30)


@pytest.mark.usefixtures("steady_hour")
def test_the_dashboard_command_on_a_cluster(
    cluster: RedisCluster, prefix: str, served: str
) -> None:
    client = webtier.connect(cluster.url)
    try:
        tier = webtier.WebTier(client, webtier.Config(prefix=prefix))
        for n in range(40):  # over many shards, so many slots and nodes
            tier.counters.record(f"views:/{n}", n + 1)
            tier.stats.record(f"/page/{n}", ACCESS_TIME, 0.001 * (n + 1))
            tier.sessions.new()
        tier.ranking.record_view("item1")
    finally:
        webtier.disconnect(client)

    def get(path: str) -> httpx.Response:
        response = httpx.get(f"{served}{path}", timeout=10)
        assert response.status_code == 200, (path, response.text)
        return response

    assert get("/api/counters?precision=60&limit=500").json()["total"] == 40
    series = get("/api/series?name=views:/3&name=views:/39&precision=60").json()["series"]
    assert [sum(c for _, c in s) for s in series.values()] == [4, 40]
    stats = get("/api/stats?by=p95&limit=100").json()["contexts"]
    assert len(stats) == 40
    assert stats[0]["context"] == "/page/39"
    assert get("/api/stats/%2Fpage%2F0").json()["points"][-1]["count"] == 1
    health = get("/api/health").json()
    assert health["sessions"]["count"] == 40
    assert health["top_items"][0]["item"] == "item1"
    assert httpx.get(f"{served}/api/series?name=nope", timeout=10).status_code == 404
    assert 'webtier_counts_total{counter="views:/39"} 40.0' in get("/metrics").text
