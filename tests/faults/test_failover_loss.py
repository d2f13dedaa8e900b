"""What a Cluster failover loses: Redis replicates asynchronously, so a
master acknowledges a write before its replica has it, and a master killed
while its replica is behind takes those writes with it.

The matrix's failover (tests/faults/test_matrix.py) kills a master whose
replica keeps up, as on a quiet local network, and records any loss it
sees. Here the replica is put behind on purpose, as a slow replica or a
network partition would: stopped (SIGSTOP), its link filled with 24 MB of
writes, then the master acknowledges more writes and is killed, and the
replica is let go and promoted. What the figures record is what each
capability loses then; what the tests assert is what survives anyway: no
write applied twice, and a write confirmed with ``WAIT`` (a barrier written
after it on the same master, then ``WAIT 1``: what a ``durable=`` option
would do) is never among the losses, because WAIT refuses to confirm it
while the replica is behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import webtier
from tests.faults.drivers import serving, wait_role
from tests.faults.figures import Figures
from tests.faults.harness import eventually
from tests.helpers.rows import Instrumented, seed, set_stock
from webtier._core.keys import shard_of
from webtier.config import Config, RetryPolicy
from webtier.sessions.layout import place
from webtier.testing import RedisCluster, RedisServer

pytestmark = [pytest.mark.faults, pytest.mark.slow]  # loads under faults: CI, not the quick run

FILLER = 24  # MB written behind the replica's back: more than the link's socket buffers


def replica_of(cluster: RedisCluster, master: RedisServer) -> RedisServer:
    with master.client(socket_timeout=2) as node:
        port = int(node.info("replication")["slave0"]["port"])
    return next(s for s in cluster.servers if s.port == port)


def confirmed(master: RedisServer, route: str, timeout_ms: int = 2000) -> bool:
    """A barrier: a write to ``route``'s slot on ``master``, then ``WAIT 1``.
    The replication stream is in order, so once the replica acknowledges the
    barrier it has every write the master took before it."""
    with master.client(socket_timeout=timeout_ms / 1000 + 2) as side:
        side.set(f"{route}:barrier", "1")
        return int(side.execute_command("WAIT", 1, timeout_ms)) >= 1


@contextlib.contextmanager
def replica_behind(cluster: RedisCluster, master: RedisServer, route: str) -> Iterator[None]:
    """Inside the block, ``master`` acknowledges writes its replica will never
    get if ``master`` dies before the block ends; after it, the replica runs
    again and is promoted (the block must kill ``master``)."""
    replica = replica_of(cluster, master)
    assert confirmed(master, route), "the replica was behind before the test"
    assert replica.process is not None
    os.kill(replica.process.pid, signal.SIGSTOP)
    try:
        with master.client(socket_timeout=10) as side:
            block = b"x" * (1 << 20)
            for n in range(FILLER):
                side.set(f"{route}:filler:{n}", block)
        yield
    finally:
        os.kill(replica.process.pid, signal.SIGCONT)
    wait_role(replica, "master", 60)


def restore(cluster: RedisCluster, master: RedisServer) -> None:
    master.launch()  # back as a replica of the promoted one
    cluster.wait_healthy()


def test_what_a_failover_loses_while_the_replica_is_behind(
    replicated: RedisCluster, figures: Figures
) -> None:
    cluster = replicated
    client = webtier.connect(cluster.url)
    prefix = f"loss{int(time.time() * 1000) % 10**8}"
    tier = webtier.WebTier(client, Config(prefix=prefix, retry=RetryPolicy(time_limit=1.0)))
    cfg = tier.config
    victim = cluster.masters()[0]

    def on_victim(route: str) -> bool:
        return serving(cluster, route).port == victim.port

    def counter_route(name: str) -> str:
        return cfg.keys.counter(name, cfg.counters.shards, cfg.counters.seconds).route

    plain = next(f"plain{n}" for n in range(1000) if on_victim(counter_route(f"plain{n}")))
    durable = next(f"durable{n}" for n in range(1000) if on_victim(counter_route(f"durable{n}")))
    route = counter_route(plain)

    def session_on_victim(user: str | None = None) -> str:
        while True:
            token = tier.sessions.new(user=user)
            if on_victim(place(cfg, token).route):
                return token
            tier.sessions.logout(token)

    before = 20
    for _ in range(before):
        tier.counters.record(plain)
    ended = [session_on_victim() for _ in range(5)]  # replicated, then logged out in the stall
    signed_in = session_on_victim()
    acked = {"plain": before, "durable": 0}
    waited = 0  # durable writes WAIT confirmed
    created: list[str] = []
    try:
        with replica_behind(cluster, victim, route):
            for _ in range(50):
                tier.counters.record(plain)
                acked["plain"] += 1
            for _ in range(5):
                tier.counters.record(durable)
                acked["durable"] += 1
                waited += confirmed(victim, counter_route(durable), timeout_ms=100)
            created = [session_on_victim() for _ in range(5)]
            for token in ended:
                tier.sessions.logout(token)
            tier.carts.set(signed_in, "hat", 3)
            victim.kill()
        stored = {
            name: eventually(lambda n=name: sum(c for _, c in tier.counters.get(n, 86400)))
            for name in (plain, durable)
        }
        alive = {
            "created": sum(
                eventually(lambda t=t: tier.sessions.info(t)) is not None for t in created
            ),
            "logged out": sum(
                eventually(lambda t=t: tier.sessions.info(t)) is not None for t in ended
            ),
        }
        cart = eventually(lambda: tier.carts.get(signed_in))
    finally:
        restore(cluster, victim)
        webtier.disconnect(client)
    lost_plain = acked["plain"] - stored[plain]
    figures.add(
        capability="replication",
        fault="failover, replica behind",
        recovery={},
        outcomes={},
        invariant={
            "increments acknowledged": acked["plain"],
            "increments stored after the failover": stored[plain],
            "increments lost": lost_plain,
            "durable increments acknowledged": acked["durable"],
            "durable increments WAIT confirmed": waited,
            "durable increments stored": stored[durable],
            "sessions created, acknowledged": len(created),
            "sessions created, alive after": alive["created"],
            "sessions logged out, acknowledged": len(ended),
            "sessions logged out, alive again after": alive["logged out"],
            "cart line set to 3, after": cart.get("hat", 0),
        },
        losses=[],
        notes={"filler MB": FILLER},
    )
    # Never applied twice, whatever was lost (every write here was acknowledged).
    assert stored[plain] <= acked["plain"]
    assert stored[durable] <= acked["durable"]
    # WAIT confirms nothing while the replica is behind: a durable write is
    # acknowledged only once its replica has it, and then survives.
    assert waited == 0
    assert stored[durable] >= waited
    # What was replicated before the replica fell behind survives.
    assert stored[plain] >= before


def test_a_write_confirmed_by_wait_survives_a_failover(
    replicated: RedisCluster, figures: Figures
) -> None:
    # The durable path when the replica keeps up: every increment confirmed
    # by WAIT before the kill is there after the promotion.
    cluster = replicated
    client = webtier.connect(cluster.url)
    prefix = f"wait{int(time.time() * 1000) % 10**8}"
    tier = webtier.WebTier(client, Config(prefix=prefix, retry=RetryPolicy(time_limit=1.0)))
    cfg = tier.config
    victim = cluster.masters()[0]

    def route_of(name: str) -> str:
        return cfg.keys.counter(name, cfg.counters.shards, cfg.counters.seconds).route

    name = next(
        f"hits{n}"
        for n in range(1000)
        if serving(cluster, route_of(f"hits{n}")).port == victim.port
    )
    sure = 0
    waits: list[float] = []
    replica = replica_of(cluster, victim)
    try:
        for _ in range(200):
            tier.counters.record(name)
            began = time.monotonic()
            assert confirmed(victim, route_of(name), timeout_ms=1000)
            waits.append(time.monotonic() - began)
            sure += 1
        victim.kill()
        wait_role(replica, "master", 60)
        stored = eventually(lambda: sum(c for _, c in tier.counters.get(name, 86400)))
    finally:
        restore(cluster, victim)
        webtier.disconnect(client)
    waits.sort()
    figures.add(
        capability="replication",
        fault="failover, WAIT confirmed",
        recovery={},
        outcomes={},
        invariant={
            "confirmed": sure,
            "stored": stored,
            "barrier + WAIT ms (median)": round(waits[len(waits) // 2] * 1000, 3),
            "barrier + WAIT ms (p99)": round(waits[int(len(waits) * 0.99)] * 1000, 3),
        },
        losses=[],
        notes={},
    )
    assert stored == sure


def test_a_row_load_from_before_a_failover_never_stores_over_a_newer_one(
    replicated: RedisCluster, tmp_path: Path
) -> None:
    # A load takes its ticket while the replica is behind and reads v1; the
    # master dies and the replica is promoted without that ticket. After the
    # failover, v2 is written and invalidated (acknowledged by the new master,
    # never lost), and a second load takes a ticket and reads v2. If the
    # first load can store now, the copy goes back to v1.
    cluster = replicated
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    inner = seed(engine, 50)
    client = webtier.connect(cluster.url)
    cfg = Config(prefix=f"tk{int(time.time() * 1000) % 10**8}")
    tier = webtier.WebTier(client, cfg)
    victim = cluster.masters()[0]

    def shard_route(row: int) -> str:
        return cfg.keys.row_shard(inner.name, shard_of(inner.key(row), cfg.rows.shards)).route

    row = next(r for r in range(1, 51) if serving(cluster, shard_route(r)).port == victim.port)
    set_stock(engine, row, 1)
    assert tier.rows.get(inner, row, load=True)["stock"] == 1  # the shard's tickets begin
    tier.rows.invalidate(inner, row)
    first, second = Instrumented(inner, gated=True), Instrumented(inner, gated=True)
    got: dict[str, Any] = {}

    def read(name: str, source: Instrumented) -> None:
        got[name] = tier.rows.get(source, row, load=True)

    one = threading.Thread(target=read, args=("first", first))
    try:
        with replica_behind(cluster, victim, shard_route(row)):
            one.start()
            assert first.read.wait(10)  # its ticket taken, v1 read
            victim.kill()
        set_stock(engine, row, 2)
        eventually(lambda: tier.rows.invalidate(inner, row))
        two = threading.Thread(target=read, args=("second", second))
        two.start()
        assert second.read.wait(30)  # a ticket of the promoted master, v2 read
        first.gate.set()
        one.join(30)
        second.gate.set()
        two.join(30)
        copy = eventually(lambda: tier.rows.get(inner, row))
    finally:
        first.gate.set()
        second.gate.set()
        restore(cluster, victim)
        webtier.disconnect(client)
        engine.dispose()
    assert copy is None or copy["stock"] == 2, f"back in time: {copy['stock']}"
