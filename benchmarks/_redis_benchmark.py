"""The raw limit: the real ``redis-benchmark`` sending the very command our
code sends, from a C client that costs next to nothing per request.

What it reaches is what the server (and loopback) allow for that command;
the gap between it and a Python client is the client's cost.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import redis

from webtier._core.protocol import Arg


class Unsupported(Exception):
    """redis-benchmark cannot be run here; the message says why."""


def find_redis_benchmark(server_binary: str | None) -> str | None:
    """The redis-benchmark beside ``server_binary``, else the one on PATH."""
    if server_binary:
        beside = Path(server_binary).with_name("redis-benchmark")
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside)
    return shutil.which("redis-benchmark")


def connection_args(client: redis.Redis) -> list[str]:
    """redis-benchmark options reaching the server and database of ``client``."""
    pool = client.connection_pool
    if issubclass(pool.connection_class, redis.SSLConnection):
        raise Unsupported("TLS connections are not passed on to redis-benchmark")
    options = pool.connection_kwargs
    if options.get("path"):
        args = ["-s", str(options["path"])]
    else:
        args = ["-h", str(options.get("host") or "127.0.0.1"), "-p", str(options.get("port", 6379))]
    if options.get("username"):
        args += ["--user", str(options["username"])]
    if options.get("password"):
        args += ["-a", str(options["password"]), "--no-auth-warning"]
    return [*args, "--dbnum", str(options.get("db") or 0)]


class RedisBenchmark:
    """Runs ``redis-benchmark`` for one command and reads its rate."""

    def __init__(self, binary: str, connection: Sequence[str]) -> None:
        self.binary = binary
        self.connection = list(connection)

    def version(self) -> str:
        done = subprocess.run([self.binary, "--version"], capture_output=True, text=True)
        return done.stdout.strip()

    def rate(
        self, command: Sequence[Arg], clients: int, seconds: float, pipeline: int = 1
    ) -> float:
        """Commands per second over about ``seconds``, with ``clients``
        connections and ``pipeline`` commands per round trip (``-P``)."""
        # redis-benchmark stops after a number of requests, not a time: a
        # short run first finds how many fill the time asked for.
        quick = self._run(command, clients, pipeline, 500 * clients * pipeline)
        return self._run(command, clients, pipeline, max(1000, int(quick * seconds)))

    def _run(self, command: Sequence[Arg], clients: int, pipeline: int, requests: int) -> float:
        args = [self.binary, *self.connection]
        args += ["-c", str(clients), "-n", str(requests), "-P", str(pipeline), "--csv"]
        args += [a.decode() if isinstance(a, bytes) else str(a) for a in command]
        done = subprocess.run(args, capture_output=True, text=True, timeout=600)
        rows = list(csv.reader(done.stdout.splitlines()))
        if done.returncode != 0 or len(rows) < 2 or "rps" not in rows[0]:
            raise RuntimeError(
                f"redis-benchmark failed ({done.returncode}): {done.stderr.strip()[-500:]}"
            )
        return float(rows[1][rows[0].index("rps")])
