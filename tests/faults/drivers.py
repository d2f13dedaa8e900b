"""One driver per fault kind: what it does to the servers, for how long,
and from when recovery counts.

Every fault holds about :data:`HOLD` seconds (a failover as long as Redis
Cluster takes). ``strike`` returns ``(began, lifted)``, ``time.monotonic()``
seconds: recovery is measured from ``lifted``, when the fault was lifted and
Redis could answer again (the restarted server answering, SIGCONT sent, the
pause over, the kills stopped, the replica promoted).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from redis.crc import key_slot

from webtier.testing import RedisCluster, RedisServer

HOLD = 1.0  # seconds a fault holds


@dataclass
class Target:
    """What a fault strikes: one server, or a master of a Cluster."""

    url: str
    server: RedisServer  # the standalone server, or the master a failover kills
    cluster: RedisCluster | None = None
    notes: dict[str, Any] = field(default_factory=dict)  # what the fault measured

    def on_victim(self, key: str) -> bool:
        """Whether ``key``'s slot is served by :attr:`server`."""
        if self.cluster is None:
            return True
        return serving(self.cluster, key).port == self.server.port


def serving(cluster: RedisCluster, key: str) -> RedisServer:
    """The master serving ``key``'s slot now."""
    slot = key_slot(key.encode())
    by_port = {server.port: server for server in cluster.servers}
    for server in cluster.servers:
        with contextlib.suppress(Exception), server.client(socket_timeout=2) as node:
            for start, end, primary, *_ in node.execute_command("CLUSTER SLOTS"):
                if start <= slot <= end:
                    return by_port[int(primary[1])]
    raise AssertionError(f"no node serves slot {slot}")


class Fault:
    name = ""
    # True when the fault may lose acknowledged writes: Redis replicates
    # asynchronously, so a master killed loses what its replica had not got.
    lossy = False

    def strike(self, target: Target) -> tuple[float, float]:
        raise NotImplementedError

    def restore(self, target: Target) -> None:
        """Make the target whole again for the next test."""


class Kill9(Fault):
    """``kill -9``, then a restart on the same port and data (AOF, fsync always)."""

    name = "kill-9+restart"

    def strike(self, target: Target) -> tuple[float, float]:
        began = time.monotonic()
        target.server.kill()
        time.sleep(HOLD)
        target.server.launch()  # returns once it answers PING, its AOF loaded
        return began, time.monotonic()


class Stop(Fault):
    """SIGSTOP, then SIGCONT: connections open, no answer (a hung server)."""

    name = "sigstop"

    def strike(self, target: Target) -> tuple[float, float]:
        process = target.server.process
        assert process is not None
        began = time.monotonic()
        os.kill(process.pid, signal.SIGSTOP)
        try:
            time.sleep(HOLD)
        finally:
            os.kill(process.pid, signal.SIGCONT)
        return began, time.monotonic()


class Pause(Fault):
    """``CLIENT PAUSE <ms> WRITE`` (reads go on, writes and scripts wait) or
    ``ALL`` (every command waits)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.name = f"pause-{mode.lower()}"

    def strike(self, target: Target) -> tuple[float, float]:
        with target.server.client(socket_timeout=5) as admin:
            admin.execute_command("CLIENT", "PAUSE", int(HOLD * 1000), self.mode)
            began = time.monotonic()
        time.sleep(HOLD)
        return began, began + HOLD


class KillStorm(Fault):
    """``CLIENT KILL TYPE normal`` every 50 ms: every client connection cut,
    mid-command or idle (the admin connection spared)."""

    name = "client-kill"
    every = 0.05

    def strike(self, target: Target) -> tuple[float, float]:
        killed = 0
        with target.server.client(socket_timeout=5) as admin:
            began = time.monotonic()
            while time.monotonic() - began < HOLD:
                killed += int(admin.execute_command("CLIENT", "KILL", "TYPE", "normal"))
                time.sleep(self.every)
        target.notes["connections killed"] = killed
        return began, time.monotonic()


class Failover(Fault):
    """``kill -9`` of a Cluster master that has a replica: Redis Cluster
    promotes the replica after the node timeout (recovery counts from the
    promotion; the kill's own cost is ``promoted after s``); the killed
    master is restarted afterwards and comes back as a replica."""

    name = "failover"
    lossy = True

    def strike(self, target: Target) -> tuple[float, float]:
        assert target.cluster is not None
        with target.server.client(socket_timeout=2) as node:
            info = node.info("replication")
        replica_port = int(info["slave0"]["port"])
        replica = next(s for s in target.cluster.servers if s.port == replica_port)
        began = time.monotonic()
        target.server.kill()
        promoted = wait_role(replica, "master", 60)
        target.notes["promoted after s"] = round(promoted - began, 3)
        return began, promoted

    def restore(self, target: Target) -> None:
        assert target.cluster is not None
        target.server.launch()  # rejoins as a replica of the promoted one
        target.cluster.wait_healthy()


def wait_role(server: RedisServer, role: str, timeout: float) -> float:
    """Until ``server`` says it is a ``role``; the time it first did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception), server.client(socket_timeout=1) as node:
            if node.info("replication")["role"] == role:
                return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"{server.port} never became a {role}")


STANDALONE_FAULTS: dict[str, Fault] = {
    f.name: f for f in (Kill9(), Stop(), Pause("WRITE"), Pause("ALL"), KillStorm())
}
