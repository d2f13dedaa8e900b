"""What the session middleware tests share: commands served by the target's
servers, cookie helpers."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from werkzeug.serving import make_server

from webtier.testing import RedisCluster, RedisServer

KEY = b"session-signing-key-of-32-bytes!"
OLD_KEY = b"an-older-signing-key-of-32-bytes"

# Commands that run without any client asking (replication, cluster bus
# checks) or that counting itself sends.
_BACKGROUND = {"info", "replconf", "ping", "cluster", "psync", "sync", "command", "client", "hello"}


def target_servers(target: str, request: pytest.FixtureRequest) -> list[RedisServer]:
    """The servers of ``target`` that clients write to (a cluster's masters)."""
    if target == "cluster":
        cluster: RedisCluster = request.getfixturevalue("cluster")
        return cluster.masters()
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


def set_cookies(headers: Any) -> list[str]:
    """The Set-Cookie values of an httpx response."""
    return list(headers.get_list("set-cookie"))


def cookie_value(set_cookie: str) -> str:
    return set_cookie.split(";", 1)[0].split("=", 1)[1]


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serves the WSGI ``app`` over HTTP with Werkzeug's threaded server."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)


@contextlib.contextmanager
def uvicorn_serving(app: Any, **settings: Any) -> Iterator[str]:
    """Serves ``app`` with uvicorn on a free loopback port, in a thread;
    ``settings`` go to uvicorn's Config (TLS files...)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="on", log_level="warning", **settings)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            threading.Event().wait(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
