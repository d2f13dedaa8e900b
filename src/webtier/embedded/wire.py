"""The few words webtier says to its embedded server without redis-py:
whether it answers, its settings, and asking it to save and stop. Every
exchange authenticates first with the data directory's password (see
:mod:`webtier.embedded.password`)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

Reply = bytes | int | list["Reply"] | Exception | None


def _encode(command: tuple[str | int, ...]) -> bytes:
    parts = [str(part).encode() for part in command]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def _parse(buffer: bytes, start: int = 0) -> tuple[Reply, int] | None:
    """One RESP2 reply from ``buffer[start:]`` and where it ends; None if
    it is not all there yet."""
    end = buffer.find(b"\r\n", start)
    if end < 0:
        return None
    kind, line, after = buffer[start : start + 1], buffer[start + 1 : end], end + 2
    if kind == b"+":
        return line, after
    if kind == b"-":
        return OSError(line.decode(errors="replace")), after
    if kind == b":":
        return int(line), after
    if kind == b"$":
        size = int(line)
        if size < 0:
            return None, after
        if len(buffer) < after + size + 2:
            return None
        return buffer[after : after + size], after + size + 2
    if kind == b"*":
        items: list[Reply] = []
        for _ in range(max(int(line), 0)):
            parsed = _parse(buffer, after)
            if parsed is None:
                return None
            item, after = parsed
            items.append(item)
        return items, after
    raise OSError(f"not a Redis reply: {buffer[start : start + 40]!r}")


def ask(
    path: Path, password: str | None, *commands: tuple[str | int, ...], timeout: float
) -> list[Reply]:
    """The server's replies to ``commands``, sent in one write after AUTH
    (whose reply is left out); fewer if it closed the connection."""
    sent = ((("AUTH", password),) if password else ()) + commands
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(b"".join(_encode(command) for command in sent))
        buffer, at = b"", 0
        replies: list[Reply] = []
        while len(replies) < len(sent) and (chunk := sock.recv(65536)):
            buffer += chunk
            while len(replies) < len(sent) and (parsed := _parse(buffer, at)) is not None:
                reply, at = parsed
                replies.append(reply)
    return replies[1:] if password else replies


def answers_ping(path: Path, password: str | None) -> bool:
    """Whether a redis-server answers PING on the unix socket ``path``."""
    try:
        return ask(path, password, ("PING",), timeout=1.0) == [b"PONG"]
    except OSError:
        return False


def server_pid(path: Path, password: str | None) -> int | None:
    """The pid of the redis-server on ``path``, None if none answers."""
    try:
        (info,) = ask(path, password, ("INFO", "server"), timeout=2.0)
    except (OSError, ValueError):
        return None
    for line in info.split(b"\r\n") if isinstance(info, bytes) else ():
        if line.startswith(b"process_id:"):
            return int(line.split(b":", 1)[1])
    return None


def config_get(path: Path, password: str | None, name: str) -> str:
    """One setting of the server (``CONFIG GET name``), as text."""
    (reply,) = ask(path, password, ("CONFIG", "GET", name), timeout=2.0)
    if isinstance(reply, Exception):
        raise reply
    if not isinstance(reply, list) or len(reply) != 2 or not isinstance(reply[1], bytes):
        raise OSError(f"CONFIG GET {name}: unexpected reply {reply!r}")
    return reply[1].decode()


def config_set(path: Path, password: str | None, name: str, value: str | int) -> None:
    (reply,) = ask(path, password, ("CONFIG", "SET", name, value), timeout=5.0)
    if isinstance(reply, Exception):
        raise reply


def shutdown_save(path: Path, password: str | None, *, timeout: float = 60.0) -> None:
    """``SHUTDOWN SAVE``: the server writes its data to disk, then exits;
    returns once its process is gone (or there was none)."""
    pid = server_pid(path, password)
    if pid is None:
        return
    try:
        replies = ask(path, password, ("SHUTDOWN", "SAVE"), timeout=timeout)
    except OSError:
        replies = []  # the server closes the connection as it exits
    if replies and isinstance(replies[0], Exception):
        raise OSError(f"redis-server refused SHUTDOWN SAVE: {replies[0]}")
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
