"""Real Redis servers for the tests: the binaries and targets the suite
runs on, every key of a server or cluster, faults (a stalled server, a load
running meanwhile), processes, and reading what servers were asked."""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.pool
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.cluster

import webtier
from webtier import ranking
from webtier._core.protocol import ScriptCall
from webtier.config import Config
from webtier.embedded import bundled_redis_server, find_redis_server
from webtier.testing import RedisCluster, RedisSentinel, RedisServer


def _binaries() -> dict[str, str]:
    chosen = os.environ.get("WEBTIER_TEST_REDIS_SERVER")
    default = find_redis_server(chosen)
    found = {"standalone": default}
    bundled = bundled_redis_server()
    if bundled and os.path.realpath(bundled) != os.path.realpath(default):
        found["standalone-6.2"] = bundled
    return found


BINARIES = _binaries()


# "sentinel": a master, two replicas and three sentinels (redis+sentinel://).
TARGETS = [*BINARIES, "cluster", "sentinel"]


def all_keys(url: str, pattern: str) -> list[bytes]:
    """Every key matching ``pattern`` on a server or on every cluster master."""
    client = webtier.connect(url)
    try:
        if isinstance(client, redis.cluster.RedisCluster):
            nodes = client.get_primaries()
            return sorted(
                key
                for node in nodes
                for key in client.scan_iter(match=pattern, count=1000, target_nodes=node)
            )
        return sorted(client.scan_iter(match=pattern, count=1000))
    finally:
        webtier.disconnect(client)


def wait_for(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Poll ``check`` until it is true; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def wait_until(check: object, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def servers_for(socket_path: Path) -> list[int]:
    """Pids of redis-server processes serving ``socket_path``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        # redis-server rewrites its title to "redis-server unixsocket:<path>".
        if b"redis-server" in cmdline and str(socket_path).encode() in cmdline:
            found.append(int(entry.name))
    return found


# Commands that run without any client asking (replication, cluster bus
# checks) or that counting itself sends.
_BACKGROUND = {"info", "replconf", "ping", "cluster", "psync", "sync", "command", "client", "hello"}


def target_servers(target: str, request: pytest.FixtureRequest) -> list[RedisServer]:
    """The servers of ``target`` that clients write to (a cluster's masters)."""
    if target == "cluster":
        cluster: RedisCluster = request.getfixturevalue("cluster")
        return cluster.masters()
    if target == "sentinel":
        sentinel: RedisSentinel = request.getfixturevalue("sentinel")
        return [sentinel.current_master()]
    servers: dict[str, RedisServer] = request.getfixturevalue("servers")
    return [servers[target]]


def commands_served(servers: list[RedisServer]) -> int:
    """How many commands clients had ``servers`` run so far (INFO commandstats)."""
    total = 0
    for server in servers:
        with contextlib.closing(server.client(socket_timeout=5)) as client:
            stats: dict[str, Any] = client.info("commandstats")
        for name, figures in stats.items():
            command = name.removeprefix("cmdstat_").split("|")[0]
            if command not in _BACKGROUND:
                total += int(figures["calls"])
    return total


def run_script(redis_url: str, call: Any) -> Any:
    """Send one script call by hand, as a client that then dies would
    (nothing follows it), and return its reply."""
    assert isinstance(call, ScriptCall)
    client = webtier.connect(redis_url)
    try:
        return client.eval(call.script.source.decode(), len(call.keys), *call.keys, *call.args)
    finally:
        webtier.disconnect(client)


def ranking_scores(client: Any, config: Config) -> dict[str, float]:
    """Every item's views, read from each shard of ``config``'s ranking (a
    tier's config: its shard count decided), checking that each item is in
    its own shard."""
    found: dict[str, float] = {}
    shards = ranking.ops.shards_of(config)
    for shard in shards:
        for item, score in client.zrange(shard.viewed, 0, -1, withscores=True):
            name = item.decode()
            assert ranking.ops.shard_for(config, name) == shard, f"{name} in the wrong shard"
            found[name] = score
    return found


def _pid_after(pause: float) -> int:
    time.sleep(pause)  # held a moment, so that each idle process takes one call
    return os.getpid()


@contextlib.contextmanager
def spawned_pool(processes: int) -> Iterator[multiprocessing.pool.Pool]:
    """A pool of ``processes`` spawned processes (a fork would copy the test's
    threads and sockets), each of them started and past its imports: work
    handed out now begins within a moment, even on a busy machine."""
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        seen: set[int] = set()
        for _ in range(100):
            seen.update(pool.map(_pid_after, [0.1] * processes, chunksize=1))
            if len(seen) >= processes:
                break
        else:
            raise RuntimeError(f"only {len(seen)} of {processes} processes started")
        yield pool


class Stall:
    """Blocks the server for ``seconds`` with DEBUG SLEEP, sent synchronously
    on a socket of its own, so the stall is certain to have begun before the
    test goes on, however loaded the machine is."""

    def __init__(self, server: RedisServer, seconds: float) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port))
        self.sock.sendall(f"DEBUG SLEEP {seconds}\r\n".encode())
        time.sleep(0.2)  # an idle server picks it up at once

    def join(self) -> None:
        """Wait for the end of the stall."""
        self.sock.settimeout(60)
        assert self.sock.recv(16).startswith(b"+OK")
        self.sock.close()


def stall(server: RedisServer, seconds: float) -> Stall:
    return Stall(server, seconds)


class BackgroundLoad:
    """Runs ``step`` over and over on a thread while the block runs, for the
    fault tests: counts each outcome by the name ``step`` returns, and
    ``"unavailable"`` when it raises RedisUnavailable (OutcomeUnknown
    included); any other error is kept in ``errors`` and ends the load."""

    def __init__(self, step: Callable[[], str]) -> None:
        self.outcomes: Counter[str] = Counter()
        self.errors: list[BaseException] = []
        self._step = step
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.outcomes[self._step()] += 1
            except webtier.RedisUnavailable:
                self.outcomes["unavailable"] += 1
            except BaseException as error:
                self.errors.append(error)
                return

    def __enter__(self) -> BackgroundLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
