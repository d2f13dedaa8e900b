"""The few words webtier says to its embedded server without redis-py:
whether it answers, and asking it to save and stop."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path


def _ask(path: Path, command: bytes, *, timeout: float) -> bytes:
    """The server's whole reply to ``command`` (a simple or bulk string),
    or what came before it closed the connection."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(command)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
            if _complete(reply):
                break
        return reply


def _complete(reply: bytes) -> bool:
    head, sep, rest = reply.partition(b"\r\n")
    if not sep:
        return False
    if not head.startswith(b"$"):
        return True
    return len(rest) >= int(head[1:]) + 2


def answers_ping(path: Path) -> bool:
    """Whether a redis-server answers PING on the unix socket ``path``."""
    try:
        return _ask(path, b"PING\r\n", timeout=1.0).startswith(b"+PONG")
    except OSError:
        return False


def server_pid(path: Path) -> int | None:
    """The pid of the redis-server on ``path``, None if none answers."""
    try:
        info = _ask(path, b"INFO server\r\n", timeout=2.0)
    except OSError:
        return None
    for line in info.split(b"\r\n"):
        if line.startswith(b"process_id:"):
            return int(line.split(b":", 1)[1])
    return None


def shutdown_save(path: Path, *, timeout: float = 60.0) -> None:
    """``SHUTDOWN SAVE``: the server writes its data to disk, then exits;
    returns once its process is gone (or there was none)."""
    pid = server_pid(path)
    if pid is None:
        return
    try:
        reply = _ask(path, b"SHUTDOWN SAVE\r\n", timeout=timeout)
    except OSError:
        reply = b""  # the server closes the connection as it exits
    if reply.startswith(b"-"):
        raise OSError(f"redis-server refused SHUTDOWN SAVE: {reply.decode(errors='replace')}")
    wait_gone(pid, timeout)


def wait_gone(pid: int, timeout: float) -> bool:
    """Waits until process ``pid`` is gone (or a zombie); False if it stays."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_gone(pid):
            return True
        time.sleep(0.02)
    return False


def is_gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")
