"""What ``webtier server status`` shows about an embedded server: what the
server itself says it binds, not what it was asked to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from webtier.embedded.binary import socket_path_for
from webtier.embedded.keeper import last_event
from webtier.embedded.leases import live_leases
from webtier.embedded.password import password_of, password_path
from webtier.embedded.wire import answers_ping


@dataclass(frozen=True)
class ServerStatus:
    """The embedded server of a data directory, running or not."""

    data_dir: Path
    socket_path: Path
    running: bool
    pid: int | None = None
    port: int = 0  # 0: no TCP
    bind: tuple[str, ...] = ()  # the addresses the TCP port listens on
    clients: int = 0  # connections open now
    users: int = 0  # webtier processes holding a lease
    memory: str = ""  # used_memory_human, e.g. "1.02M"
    password_file: Path | None = None  # None: the server needs no password
    last_event: str = ""  # the keeper's last word (see keeper.last_event)

    def lines(self) -> list[str]:
        """For people: one fact per line."""
        if not self.running:
            event = f"; last: {self.last_event}" if self.last_event else ""
            return [f"not running (data dir {self.data_dir}){event}"]
        tcp = (
            ", ".join(f"[{a}]:{self.port}" if ":" in a else f"{a}:{self.port}" for a in self.bind)
            if self.port
            else "none"
        )
        return [
            f"running: pid {self.pid} ({self.last_event or 'no keeper record'})",
            f"socket: {self.socket_path}",
            f"tcp: {tcp}",
            f"password: {self.password_file or 'none'}",
            f"data dir: {self.data_dir}",
            f"clients: {self.clients} connections, {self.users} webtier processes",
            f"memory: {self.memory}",
        ]


def server_status(data_dir: Path) -> ServerStatus:
    """The status of ``data_dir``'s server, without starting it."""
    data_dir = data_dir.resolve()
    path, password = socket_path_for(data_dir), password_of(data_dir)
    if not answers_ping(path, password):
        return ServerStatus(data_dir, path, running=False, last_event=last_event(data_dir))
    import redis

    client = redis.Redis(unix_socket_path=str(path), password=password, decode_responses=True)
    try:
        info = client.info()
        settings = client.config_get("port") | client.config_get("bind")
        needs_password = bool(client.config_get("requirepass").get("requirepass"))
    finally:
        client.close()
    return ServerStatus(
        data_dir,
        path,
        running=True,
        pid=int(info["process_id"]),
        port=int(settings.get("port") or 0),
        # "-" marks an address the server may skip (no IPv6): not bound then.
        bind=tuple(a.lstrip("-") for a in (settings.get("bind") or "*").split()),
        clients=int(info["connected_clients"]) - 1,  # not counting this one
        users=live_leases(data_dir, reclaim=False),
        memory=str(info["used_memory_human"]),
        password_file=password_path(data_dir) if needs_password else None,
        last_event=last_event(data_dir),
    )
