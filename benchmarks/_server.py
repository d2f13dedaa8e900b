"""The Redis server a benchmark runs against, and what it reports of itself.

By default the bench starts a redis-server of its own on a free loopback
port (:class:`webtier.testing.RedisServer`) and stops it at the end. Given a
URL, it uses that server's database N for webtier and N+1 for the book's
ports (whose global keys, ``known:`` and ``count:...``, must not meet
webtier's); both must be empty, since the bench flushes them between parts
and at the end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis

from webtier.connect import connect, parse
from webtier.embedded import find_redis_server
from webtier.errors import ConfigError, EmbeddedServerError
from webtier.testing import RedisServer

# Never counted as the workload's: the bench's own probes.
_PROBE_COMMANDS = frozenset({"info", "config", "ping"})


@dataclass(frozen=True, slots=True)
class Usage:
    """Server work since the last :meth:`BenchServer.reset_stats`."""

    usec: int  # INFO commandstats time of the counted commands
    cpu_seconds: float  # the server process's CPU time, user + system


def _with_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "db"]
    if parts.scheme == "unix":
        return urlunsplit(parts._replace(query=urlencode([*query, ("db", str(db))])))
    return urlunsplit(parts._replace(path=f"/{db}", query=urlencode(query)))


def _cpu_seconds(client: redis.Redis) -> float:
    cpu: dict[str, Any] = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


class BenchServer:
    """One Redis server, two empty databases: ``url`` for webtier, ``book_url``
    for the book's ports."""

    def __init__(self, url: str, owned: RedisServer | None = None) -> None:
        if parse(url).cluster:
            raise ConfigError(
                "the benchmarks compare with the book's layout, which cannot run on "
                "Redis Cluster: give the URL of a single server"
            )
        self.owned = owned
        self.url = url
        self.admin: redis.Redis = connect(url)  # type: ignore[assignment]
        self.db = int(self.admin.connection_pool.connection_kwargs.get("db") or 0)
        self.book_url = _with_db(url, self.db + 1)
        self.book_admin: redis.Redis = connect(self.book_url)  # type: ignore[assignment]
        self._cpu_at_reset = 0.0
        self._checked_empty = False

    def check_empty(self) -> None:
        """Refuse databases holding data: the bench would flush it."""
        if self.admin.dbsize() or self.book_admin.dbsize():
            raise ConfigError(
                f"the bench needs databases {self.db} and {self.db + 1} empty "
                "(it flushes them); pick other ones in the URL"
            )
        self._checked_empty = True

    @property
    def server_binary(self) -> str | None:
        """The redis-server beside which to look for redis-benchmark."""
        if self.owned is not None:
            return self.owned.binary
        try:
            return find_redis_server()
        except EmbeddedServerError:
            return None

    @property
    def version(self) -> str:
        server: dict[str, Any] = self.admin.info("server")
        return str(server["redis_version"])

    def flush(self) -> None:
        """Empty both databases (found empty by :meth:`check_empty`)."""
        if not self._checked_empty:
            raise ConfigError("refusing to flush databases not checked to be empty")
        self.admin.flushdb()
        self.book_admin.flushdb()

    def reset_stats(self) -> None:
        self.admin.config_resetstat()
        self._cpu_at_reset = _cpu_seconds(self.admin)

    def usage(self, commands: frozenset[str] | None = None) -> Usage:
        """Work since :meth:`reset_stats`, counting only ``commands`` (lower
        case) when given, else every command but the bench's probes.

        Name the commands a client sends when it uses scripts or MULTI:
        EVALSHA's and EXEC's time already holds the commands run inside
        them, which commandstats lists a second time under their own names.
        """
        stats: dict[str, dict[str, Any]] = self.admin.info("commandstats")
        usec = 0
        for key, figures in stats.items():
            command = key.removeprefix("cmdstat_").split("|")[0].lower()
            if command in _PROBE_COMMANDS:
                continue
            if commands is None or command in commands:
                usec += int(figures["usec"])
        return Usage(usec, _cpu_seconds(self.admin) - self._cpu_at_reset)

    def used_memory(self) -> int:
        memory: dict[str, Any] = self.admin.info("memory")
        return int(memory["used_memory"])

    def close(self) -> None:
        try:
            if self.owned is None and self._checked_empty:
                self.flush()
        finally:
            self.admin.close()
            self.book_admin.close()
            if self.owned is not None:
                self.owned.stop()


@contextlib.contextmanager
def open_server(url: str | None = None) -> Iterator[BenchServer]:
    """The server at ``url``, or a redis-server started for the bench."""
    owned = RedisServer.start() if url is None else None
    try:
        server = BenchServer(owned.url if owned else str(url), owned)
    except BaseException:
        if owned is not None:
            owned.stop()
        raise
    try:
        server.check_empty()
        yield server
    finally:
        server.close()
