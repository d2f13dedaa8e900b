"""Faults on real servers: a stalled server, a restart mid-load, a failover.

These tests start servers of their own: they stall, kill and restart them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio
from redis.crc import key_slot

import webtier
from tests.helpers.servers import BackgroundLoad, stall, wait_for
from webtier._core.keys import shard_of
from webtier.config import Config, RetryPolicy
from webtier.embedded import find_redis_server
from webtier.testing import RedisCluster, RedisServer

pytestmark = pytest.mark.faults

NOW = 1_700_000_000


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer.start() as running:
        yield running


def total(server: RedisServer, prefix: str, name: str) -> int:
    tier = webtier.WebTier(server.client(), Config(prefix=prefix))
    return sum(count for _, count in tier.counters.get(name, 86400))


def test_a_stalled_server_never_gets_an_increment_twice(server: RedisServer) -> None:
    tier = webtier.WebTier(server.client(socket_timeout=0.3), Config(prefix="stall"))
    tier.counters.record("hits", 1, now=NOW)  # load the script first
    sleeper = stall(server, 1.5)
    with pytest.raises(webtier.OutcomeUnknown):
        tier.counters.record("hits", 1, now=NOW)
    sleeper.join()
    # The lost reply hid an applied increment: counted once, not twice.
    assert total(server, "stall", "hits") == 2


@pytest.mark.anyio
async def test_asyncio_api_never_applies_an_increment_twice(server: RedisServer) -> None:
    client = redis.asyncio.Redis(port=server.port, socket_timeout=0.3)
    tier = webtier.AsyncWebTier(client, Config(prefix="astall"))
    await tier.counters.record("hits", 1, now=NOW)
    sleeper = stall(server, 1.5)
    with pytest.raises(webtier.OutcomeUnknown):
        await tier.counters.record("hits", 1, now=NOW)
    await asyncio.to_thread(sleeper.join)
    await client.aclose()
    assert total(server, "astall", "hits") == 2


def test_reads_ride_out_a_short_stall(server: RedisServer) -> None:
    policy = RetryPolicy(attempts=5, backoff=0.05, backoff_cap=0.2)
    tier = webtier.WebTier(server.client(socket_timeout=0.3), Config(prefix="read", retry=policy))
    tier.counters.record("hits", 3, now=NOW)
    sleeper = stall(server, 0.8)
    assert tier.counters.get("hits", 1) == [(NOW, 3)]  # timed out, retried, answered
    sleeper.join()


def test_a_restart_mid_load_fails_cleanly_and_recovers(server: RedisServer) -> None:
    # webtier.connect: a plain client retries inside connect (4 tries, growing
    # backoff), which made a down server take seconds a call.
    tier = webtier.WebTier(webtier.connect(server.url, socket_timeout=1), Config(prefix="restart"))

    def record() -> str:
        tier.counters.record("hits", 1, now=NOW)
        return "ok"

    with BackgroundLoad(record) as load:
        wait_for(lambda: load.outcomes["ok"] > 0, "no record succeeded before the restart")
        server.kill()
        # Down until a record has given up: a shorter outage is ridden out
        # by the retry budget, which is right but not what this tests.
        wait_for(
            lambda: load.outcomes["unavailable"] > 0 or load.errors, "no record failed while down"
        )
        server.launch()  # same port, empty (no persistence)
        before = load.outcomes["ok"]
        wait_for(lambda: load.outcomes["ok"] > before or load.errors, "recording did not resume")
    assert load.errors == []
    assert total(server, "restart", "hits") > 0


def test_the_recorder_keeps_what_did_not_reach_redis(server: RedisServer) -> None:
    tier = webtier.WebTier(webtier.connect(server.url, socket_timeout=0.5), Config(prefix="rec"))
    recorder = tier.counters.recorder(flush_interval=3600)
    try:
        for _ in range(1000):
            recorder.incr("hits", 1, NOW)
        server.kill()
        report = recorder.flush()
        assert (report.sent, report.kept, report.lost) == (0, 1, 0)
        server.launch()
        report = recorder.flush()
        assert (report.sent, report.kept) == (1, 0)
    finally:
        recorder.close()
    assert total(server, "rec", "hits") == 1000


def test_the_embedded_default_and_a_6_2_server_agree() -> None:
    # The same operations on every binary this machine has.
    binaries = {find_redis_server()}
    bundled = webtier.embedded.bundled_redis_server()
    if bundled:
        binaries.add(bundled)
    for binary in binaries:
        with RedisServer.start(binary) as running:
            tier = webtier.WebTier(running.client(), Config(prefix="v"))
            tier.counters.record("x", 2, now=NOW)
            assert tier.counters.get("x", 60) == [(NOW - NOW % 60, 2)], running.version


# -- Redis Cluster failovers ------------------------------------------------------------------


@pytest.fixture
def own_cluster(replicated: RedisCluster) -> RedisCluster:
    return replicated  # the suite's Cluster with replicas, shared by the fault tests


def _owner_and_replica(cluster: RedisCluster, key: str) -> tuple[RedisServer, RedisServer]:
    """The master serving ``key``'s slot, and one of its replicas."""
    slot = key_slot(key.encode())
    with cluster.servers[0].client() as node:
        for start, end, primary, *replicas in node.execute_command("CLUSTER SLOTS"):
            if start <= slot <= end:
                by_port = {server.port: server for server in cluster.servers}
                return by_port[int(primary[1])], by_port[int(replicas[0][1])]
    raise AssertionError(f"slot {slot} is not served")


@pytest.mark.slow  # a failover on a Cluster of its own: CI, not the quick run
def test_graceful_failover_moves_and_reloads_scripts(own_cluster: RedisCluster) -> None:
    client = webtier.connect(own_cluster.url)
    tier = webtier.WebTier(client, Config(prefix="fo"))
    tier.counters.record("hits", 1, now=NOW)
    _, replica = _owner_and_replica(own_cluster, f"fo:{{c:{shard_of('hits', 64)}}}")
    with replica.client() as node:
        node.execute_command("CLUSTER", "FAILOVER")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with replica.client() as node:
            if node.info("replication")["role"] == "master":
                break
        time.sleep(0.1)
    own_cluster.wait_healthy()
    # The old master answers MOVED/READONLY; the new one may lack the script.
    tier.counters.record("hits", 1, now=NOW)
    assert tier.counters.get("hits", 1) == [(NOW, 2)]
    webtier.disconnect(client)


@pytest.mark.slow  # a failover on a Cluster of its own: CI, not the quick run
def test_a_killed_master_is_replaced_and_writes_resume(own_cluster: RedisCluster) -> None:
    client = webtier.connect(own_cluster.url, socket_timeout=1)
    tier = webtier.WebTier(client, Config(prefix="kill", retry=RetryPolicy(attempts=2)))
    tier.counters.record("hits", 1, now=NOW)
    owner, _ = _owner_and_replica(own_cluster, f"kill:{{c:{shard_of('hits', 64)}}}")
    with owner.client() as node:
        assert node.execute_command("WAIT", 1, 2000) == 1  # the write reached the replica
    owner.kill()
    try:
        failures = 0
        deadline = time.monotonic() + 30
        while True:
            try:
                tier.counters.record("hits", 1, now=NOW)
                break
            except webtier.RedisUnavailable:
                failures += 1
                assert time.monotonic() < deadline, "the cluster never recovered"
                time.sleep(0.2)
        assert failures > 0
        samples = tier.counters.get("hits", 1)
        assert samples == [(NOW, 2)]  # the replica had the first write; no double apply
    finally:
        webtier.disconnect(client)
        owner.launch()  # back as a replica: the shared Cluster whole again
        own_cluster.wait_healthy()
