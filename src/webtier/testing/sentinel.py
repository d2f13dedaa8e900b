"""A Sentinel deployment of real processes on loopback ports: one master,
its replicas (``replicaof``), and ``redis-server --sentinel`` processes
watching it (see :mod:`webtier.testing`)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webtier.testing.redis_servers import RedisServer, _wait, free_port


@dataclass
class RedisSentinel:
    """``master`` with ``replicas``, watched by ``sentinels`` under the name
    ``service``. Which server is the master changes with each failover:
    :meth:`current_master` asks."""

    servers: list[RedisServer]  # the master first, as started
    sentinels: list[RedisServer]
    directory: Path
    service: str = "mymaster"
    password: str | None = None  # the servers' (requirepass, masterauth)
    sentinel_password: str | None = None  # the sentinels' own

    @classmethod
    def start(
        cls,
        binary: str | None = None,
        replicas: int = 2,
        sentinels: int = 3,
        *,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
        service: str = "mymaster",
        password: str | None = None,
        sentinel_password: str | None = None,
        server_class: type[RedisServer] = RedisServer,
        options: Callable[[int], tuple[str, ...]] | None = None,
    ) -> RedisSentinel:
        """Start the master, its replicas and the sentinels, and wait until
        every sentinel sees every replica and every other sentinel.

        ``down_after_ms``: how long the master may be silent before the
        sentinels fail it over (a majority of them agreeing).
        ``server_class`` and ``options`` (redis-server options for a
        process on a given port) make every process, servers and sentinels:
        a TLS deployment gives a class whose clients speak TLS, and the
        options that serve TLS only on that port and replicate over TLS."""
        directory = Path(tempfile.mkdtemp(prefix="webtier-sentinel-"))
        auth = () if password is None else ("--requirepass", password, "--masterauth", password)
        deployment = cls([], [], directory, service, password, sentinel_password)

        def start(*args: str, config: Path | None = None) -> RedisServer:
            port = free_port()
            more = () if options is None else options(port)
            return server_class.start(
                binary, *args, *more, port=port, directory=directory, config=config
            )

        try:
            master = start(*auth)
            deployment.servers.append(master)
            for _ in range(replicas):
                deployment.servers.append(
                    start(*auth, "--replicaof", "127.0.0.1", str(master.port))
                )
            quorum = sentinels // 2 + 1
            for index in range(sentinels):
                config = directory / f"sentinel-{index}.conf"
                lines = [
                    f"sentinel monitor {service} 127.0.0.1 {master.port} {quorum}",
                    f"sentinel down-after-milliseconds {service} {down_after_ms}",
                    f"sentinel failover-timeout {service} {failover_timeout_ms}",
                    f"sentinel parallel-syncs {service} 1",
                ]
                if password is not None:
                    lines.append(f"sentinel auth-pass {service} {password}")
                if sentinel_password is not None:
                    lines += [
                        f"requirepass {sentinel_password}",
                        f"sentinel sentinel-pass {sentinel_password}",
                    ]
                config.write_text("\n".join(lines) + "\n")
                deployment.sentinels.append(start("--sentinel", config=config))
            deployment.wait_healthy()
        except BaseException:
            deployment.stop()
            raise
        return deployment

    @property
    def url(self) -> str:
        """A webtier URL (``redis+sentinel://``) naming every sentinel."""
        return self.url_naming(self.sentinels)

    def url_naming(self, sentinels: list[RedisServer]) -> str:
        """A webtier URL naming ``sentinels``, in that order."""
        auth = "" if self.password is None else f":{self.password}@"
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in sentinels)
        query = ""
        if self.sentinel_password is not None:
            query = f"?sentinel_password={self.sentinel_password}"
        return f"redis+sentinel://{auth}{hosts}/{self.service}/0{query}"

    def sentinel_client(self, sentinel: RedisServer, **options: Any) -> Any:
        return sentinel.client(password=self.sentinel_password, **options)

    def server_client(self, server: RedisServer, **options: Any) -> Any:
        return server.client(password=self.password, **options)

    def master_address(self, sentinel: RedisServer | None = None) -> tuple[str, int] | None:
        """The master's address as one sentinel (the first alive) has it."""
        for each in [sentinel] if sentinel is not None else self.sentinels:
            if each.process is None or each.process.poll() is not None:
                continue
            with contextlib.closing(self.sentinel_client(each, socket_timeout=2)) as client:
                found = client.execute_command("SENTINEL", "get-master-addr-by-name", self.service)
            if found:
                return found[0].decode(), int(found[1])
        return None

    def current_master(self) -> RedisServer:
        """The server the sentinels name as master now."""
        address = self.master_address()
        assert address is not None, "no sentinel names a master"
        return next(s for s in self.servers if s.port == address[1])

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Until every sentinel names the same, reachable master, sees all
        its replicas up, reporting themselves replicas of it, and every
        other sentinel, and every replica's link to the master is up."""

        def settled() -> bool:
            masters = {self.master_address(s) for s in self.sentinels}
            if len(masters) != 1 or None in masters:
                return False
            master = self.current_master()
            epochs = set()
            for sentinel in self.sentinels:
                with contextlib.closing(self.sentinel_client(sentinel, socket_timeout=2)) as client:
                    state = client.sentinel_master(self.service)
                    replicas = client.sentinel_slaves(self.service)
                # Up, and seen by this sentinel as the replica it is: the old
                # master of a failover is made a replica about 10 s after it,
                # and a sentinel that has not yet seen it report so (it polls
                # each second) makes it one again. A failover asked meanwhile
                # that promotes it has it demoted by that sentinel at once, and
                # the sentinels then name a replica as the master, with none
                # left, until they deem it down (down-after-milliseconds + 20
                # s) and fail over again: the 25 to 30 s a planned failover
                # under writes took in some runs of the fault suite.
                up = [
                    r
                    for r in replicas
                    if not (r["is_sdown"] or r["is_odown"])
                    and r.get("role-reported") == "slave"
                    and r.get("master-port") == master.port
                ]
                epochs.add(state["config-epoch"])
                # The leader of a failover names the promoted replica as the
                # master while it still reconfigures the other replicas; until
                # it ends, it knows no other master and votes in no failover
                # of the new one (with one sentinel of three down, none could
                # be elected: the next failover never came).
                if (
                    not state["is_master"]
                    or "failover_in_progress" in str(state["flags"])
                    or state["is_sdown"]
                    or state["is_odown"]
                    or len(up) != len(self.servers) - 1
                    or state["num-other-sentinels"] != len(self.sentinels) - 1
                ):
                    return False
            if len(epochs) != 1:
                return False
            for server in self.servers:
                if server is master:
                    continue
                with contextlib.closing(self.server_client(server, socket_timeout=2)) as client:
                    info = client.info("replication")
                if info["role"] != "slave" or info.get("master_port") != master.port:
                    return False
                if info.get("master_link_status") != "up":
                    return False
            return True

        _wait(settled, "the sentinels to agree on a healthy master", timeout)

    def restore(self, server: RedisServer) -> None:
        """Start a killed server again (empty: it keeps no data) and wait
        until the sentinels have made it a replica of the current master."""
        server.launch()
        self.wait_healthy()

    def stop(self) -> None:
        for server in [*self.sentinels, *self.servers]:
            server.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RedisSentinel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class StaleSentinel:
    """A sentinel that names a replica as the master of a deployment's
    service, as a sentinel that has not yet heard of a failover names the
    old master, but for as long as it runs: listed first in a URL
    (:meth:`url`), it is the first a client asks.

    It watches a replica of a server of its own, outside the deployment:
    sentinels meet, and pass each other newer configurations, through the
    servers they watch, so the deployment's sentinels never meet it and
    neither side updates the other. Its ``down-after-milliseconds`` is an
    hour: a master that reports itself a replica is deemed down after that
    plus 20 s, and a sentinel reporting it down would be skipped by flags
    alone."""

    deployment: RedisSentinel
    source: RedisServer  # outside the deployment
    replica: RedisServer  # what the sentinel names as the master
    sentinel: RedisServer

    @classmethod
    def start(cls, deployment: RedisSentinel, binary: str | None = None) -> StaleSentinel:
        directory = deployment.directory
        auth: tuple[str, ...] = ()
        if deployment.password is not None:
            auth = ("--requirepass", deployment.password, "--masterauth", deployment.password)
        started: list[RedisServer] = []
        try:
            source = RedisServer.start(binary, *auth, port=free_port(), directory=directory)
            started.append(source)
            replica = RedisServer.start(
                binary,
                *auth,
                "--replicaof",
                "127.0.0.1",
                str(source.port),
                port=free_port(),
                directory=directory,
            )
            started.append(replica)
            service = deployment.service
            lines = [
                f"sentinel monitor {service} 127.0.0.1 {replica.port} 1",
                f"sentinel down-after-milliseconds {service} 3600000",
            ]
            if deployment.password is not None:
                lines.append(f"sentinel auth-pass {service} {deployment.password}")
            if deployment.sentinel_password is not None:
                lines.append(f"requirepass {deployment.sentinel_password}")
            config = directory / "sentinel-stale.conf"
            config.write_text("\n".join(lines) + "\n")
            sentinel = RedisServer.start(
                binary, "--sentinel", port=free_port(), directory=directory, config=config
            )
            started.append(sentinel)
        except BaseException:
            for server in started:
                server.kill()
            raise
        return cls(deployment, source, replica, sentinel)

    @property
    def url(self) -> str:
        """The deployment's URL with this sentinel listed first."""
        return self.deployment.url_naming([self.sentinel, *self.deployment.sentinels])

    def names(self) -> tuple[str, int] | None:
        """The address this sentinel gives as the master."""
        return self.deployment.master_address(self.sentinel)

    def stop(self) -> None:
        for server in (self.sentinel, self.replica, self.source):
            server.kill()

    def __enter__(self) -> StaleSentinel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
