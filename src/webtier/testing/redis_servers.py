"""Real ``redis-server`` processes and clusters on loopback ports (see
:mod:`webtier.testing`)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import redis

from webtier.embedded import die_with_parent, find_redis_server, server_version
from webtier.errors import EmbeddedServerError

_READY_TIMEOUT = 30.0  # seconds


def find_redis_cli(server_binary: str) -> str:
    """The redis-cli next to ``server_binary``, else the one on PATH."""
    beside = Path(server_binary).with_name("redis-cli")
    if beside.exists():
        return str(beside)
    found = shutil.which("redis-cli")
    if not found:
        raise EmbeddedServerError(f"no redis-cli beside {server_binary} nor on PATH")
    return found


def free_port(with_bus: bool = False) -> int:
    """A free loopback port; with ``with_bus``, port + 10000 is free too
    (Redis Cluster's bus port)."""
    for _ in range(200):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if not with_bus:
            return port
        if port + 10000 <= 65535 and _is_free(port + 10000):
            return port
    raise EmbeddedServerError("no free port pair found")


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait(check: Any, what: str, timeout: float = _READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (redis.RedisError, OSError) as error:
            last = error
        time.sleep(0.05)
    raise EmbeddedServerError(f"timed out waiting for {what} (last error: {last})")


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.AuthenticationError:  # a server with a password: up all the same
        return True


@dataclass
class RedisServer:
    """One redis-server process on 127.0.0.1:``port``."""

    binary: str
    port: int
    directory: Path
    version: tuple[int, ...]
    process: subprocess.Popen[bytes] | None = None
    extra: tuple[str, ...] = ()
    config: Path | None = None  # a config file, read first (a sentinel's, which it rewrites)
    _owns_directory: bool = field(default=False, repr=False)

    @classmethod
    def start(
        cls,
        binary: str | None = None,
        *args: str,
        port: int | None = None,
        directory: Path | None = None,
        config: Path | None = None,
    ) -> RedisServer:
        """Start a server; ``args`` are extra redis-server options, read
        after the ``config`` file if there is one."""
        path = find_redis_server(binary)
        owns = directory is None
        directory = (
            Path(tempfile.mkdtemp(prefix="webtier-redis-")) if directory is None else directory
        )
        server = cls(
            path,
            port or free_port(with_bus="--cluster-enabled" in args),
            directory,
            server_version(path),
            extra=args,
            config=config,
            _owns_directory=owns,
        )
        server.launch()
        return server

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **options: Any) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **options)

    def launch(self) -> None:
        """(Re)start the process on the same port and directory."""
        args = [
            self.binary,
            *([] if self.config is None else [str(self.config)]),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "no",
            "--repl-diskless-sync-delay", "0",
            "--logfile", str(self.directory / f"redis-{self.port}.log"),
        ]  # fmt: skip
        if self.version >= (7,):
            args += ["--enable-debug-command", "local"]  # DEBUG SLEEP in fault tests
        args += self.extra
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # A test run or bench that is killed outright takes its servers along.
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )
        client = self.client(socket_timeout=1)
        try:
            _wait(lambda: self._alive() and _answers(client), f"redis-server on port {self.port}")
        finally:
            client.close()

    def _alive(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            log = self.directory / f"redis-{self.port}.log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise EmbeddedServerError(f"redis-server on {self.port} exited:\n{tail}")
        return True

    def kill(self) -> None:
        """Stop the process at once (SIGKILL), keeping its directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        self.kill()
        if self._owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class RedisCluster:
    """A Redis Cluster of real servers: ``masters`` masters with ``replicas``
    replicas each, built with ``redis-cli --cluster create``."""

    servers: list[RedisServer]
    directory: Path

    @classmethod
    def start(
        cls,
        binary: str | None = None,
        masters: int = 3,
        replicas: int = 1,
        node_timeout: int = 10_000,
    ) -> RedisCluster:
        """Start and join ``masters`` masters with ``replicas`` replicas each.

        ``node_timeout`` (ms) is how long a node may be silent before it is
        failed over: the default rides out a loaded test machine's stalls;
        tests of automatic failover pass a short one."""
        directory = Path(tempfile.mkdtemp(prefix="webtier-cluster-"))
        servers: list[RedisServer] = []
        try:
            for _ in range(masters * (1 + replicas)):
                port = free_port(with_bus=True)
                node_options = [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-node-timeout",
                    str(node_timeout),
                ]
                node_options += ["--cluster-config-file", f"nodes-{port}.conf"]
                servers.append(
                    RedisServer.start(binary, *node_options, port=port, directory=directory)
                )
            cluster = cls(servers, directory)
            cluster._create(replicas)
        except BaseException:
            for server in servers:
                server.kill()
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return cluster

    @property
    def ports(self) -> list[int]:
        return [s.port for s in self.servers]

    @property
    def url(self) -> str:
        """A webtier URL (``redis+cluster://``) naming every node as a seed."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    replicas: int = 1

    def _create(self, replicas: int) -> None:
        self.replicas = replicas
        cli = find_redis_cli(self.servers[0].binary)
        nodes = [f"127.0.0.1:{p}" for p in self.ports]
        command = [
            cli,
            "--cluster",
            "create",
            *nodes,
            "--cluster-replicas",
            str(replicas),
            "--cluster-yes",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise EmbeddedServerError(
                f"redis-cli --cluster create failed:\n{done.stdout}\n{done.stderr}"
            )
        self.wait_healthy()

    def wait_healthy(self) -> None:
        """Until every node says the cluster is ok with all slots covered,
        knows every other node and lists every range's replicas, and every
        replica's link to its master is up."""
        clients = [s.client(socket_timeout=2) for s in self.servers]
        try:
            for client in clients:
                _wait(lambda c=client: self._node_ready(c), "the cluster to become healthy")
        finally:
            for client in clients:
                client.close()

    def _node_ready(self, client: redis.Redis) -> bool:
        info = _parse_info(cast(Any, client).execute_command("CLUSTER INFO"))
        if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
            return False
        if int(info.get("cluster_known_nodes", 0)) != len(self.servers):
            return False
        ranges = cast(Any, client).execute_command("CLUSTER SLOTS")
        if any(
            len(entry) - 3 < self.replicas for entry in ranges
        ):  # [start, end, master, *replicas]
            return False
        replication = client.info("replication")
        return replication["role"] == "master" or replication.get("master_link_status") == "up"

    def masters(self) -> list[RedisServer]:
        found = []
        for server in self.servers:
            with contextlib.closing(server.client(socket_timeout=2)) as client:
                if client.info("replication")["role"] == "master":
                    found.append(server)
        return found

    def stop(self) -> None:
        for server in self.servers:
            server.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RedisCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _parse_info(raw: Any) -> dict[str, str]:
    if isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items()}
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
