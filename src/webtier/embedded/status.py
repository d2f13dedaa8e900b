"""What ``webtier server status`` shows about an embedded server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from webtier.embedded.binary import socket_path_for
from webtier.embedded.leases import live_leases
from webtier.embedded.wire import answers_ping


@dataclass(frozen=True)
class ServerStatus:
    """The embedded server of a data directory, running or not."""

    data_dir: Path
    socket_path: Path
    running: bool
    pid: int | None = None
    port: int = 0  # 0: no TCP
    clients: int = 0  # connections open now
    users: int = 0  # webtier processes holding a lease
    memory: str = ""  # used_memory_human, e.g. "1.02M"

    def lines(self) -> list[str]:
        """For people: one fact per line."""
        if not self.running:
            return [f"not running (data dir {self.data_dir})"]
        tcp = f"127.0.0.1:{self.port}" if self.port else "none"
        return [
            f"running: pid {self.pid}",
            f"socket: {self.socket_path}",
            f"tcp: {tcp}",
            f"data dir: {self.data_dir}",
            f"clients: {self.clients} connections, {self.users} webtier processes",
            f"memory: {self.memory}",
        ]


def server_status(data_dir: Path) -> ServerStatus:
    """The status of ``data_dir``'s server, without starting it."""
    data_dir = data_dir.resolve()
    path = socket_path_for(data_dir)
    if not answers_ping(path):
        return ServerStatus(data_dir, path, running=False)
    import redis

    client = redis.Redis(unix_socket_path=str(path), decode_responses=True)
    try:
        info = client.info()
        port = int(client.config_get("port").get("port") or 0)
    finally:
        client.close()
    return ServerStatus(
        data_dir,
        path,
        running=True,
        pid=int(info["process_id"]),
        port=port,
        clients=int(info["connected_clients"]) - 1,  # not counting this one
        users=live_leases(data_dir, reclaim=False),
        memory=str(info["used_memory_human"]),
    )
