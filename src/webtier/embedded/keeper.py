"""The keeper: a small daemon that runs the shared redis-server for a data
directory and stops it when its last user is gone.

The first webtier process to need the server starts the keeper (under the
start lock) and returns; the keeper detaches (a session of its own, its
parent gone), so no user process takes the server down with it. Every
``CHECK_EVERY`` seconds it counts the live leases (see
:mod:`webtier.embedded.leases`); when none is left, e.g. the last user was
killed with ``kill -9``, it stops the server with ``SHUTDOWN SAVE``. A user
leaving normally does that itself at once. If the keeper itself is killed,
the kernel sends the server SIGTERM (``PR_SET_PDEATHSIG``), and redis-server
flushes its append-only file as it exits.

Run as ``python -m webtier.embedded DATA_DIR PORT``, the redis-server
to run in ``$WEBTIER_KEEPER_REDIS_SERVER``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from webtier.embedded.binary import die_with_parent, socket_path_for
from webtier.embedded.leases import live_leases, start_lock
from webtier.embedded.wire import shutdown_save

CHECK_EVERY = 0.25  # seconds between two counts of the leases
BINARY_VARIABLE = "WEBTIER_KEEPER_REDIS_SERVER"
PID_FILE = "keeper.pid"  # written by the keeper's parent, before it exits


def server_arguments(binary: str, data_dir: Path, socket_path: Path, port: int) -> list[str]:
    """redis-server's command line: a unix socket (owner-only), TCP on
    127.0.0.1 only if ``port``, append-only persistence."""
    tcp = ["--port", str(port), "--bind", "127.0.0.1"] if port else ["--port", "0"]
    return [
        binary,
        *tcp,
        "--unixsocket", str(socket_path),
        "--unixsocketperm", "700",
        "--dir", str(data_dir),
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--save", "",
        "--daemonize", "no",
        "--logfile", str(data_dir / "redis.log"),
    ]  # fmt: skip


def launch(binary: str, data_dir: Path, port: int) -> int:
    """Starts a keeper for ``data_dir`` and returns its pid once it has
    detached (the caller then waits for the server to answer). The binary
    goes in the environment: only the server's own command line names it."""
    with (data_dir / "keeper.log").open("ab") as log:
        subprocess.run(
            [sys.executable, "-m", "webtier.embedded", str(data_dir), str(port)],
            env={**os.environ, BINARY_VARIABLE: binary},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            check=True,
            timeout=30,
        )
    return int((data_dir / PID_FILE).read_text())


def keep(data_dir: Path, socket_path: Path, binary: str, port: int) -> int:
    """Runs the server until it exits or no lease is left; its exit code."""
    server = subprocess.Popen(
        server_arguments(binary, data_dir, socket_path, port),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent if sys.platform == "linux" else None,
    )
    signal.signal(signal.SIGTERM, lambda *_: server.terminate())
    while server.poll() is None:
        time.sleep(CHECK_EVERY)
        with start_lock(data_dir, wait=False) as locked:
            if locked and server.poll() is None and live_leases(data_dir) == 0:
                shutdown_save(socket_path)
    return server.wait()


def main(argv: list[str]) -> int:
    data_dir, port = Path(argv[0]), int(argv[1])
    binary = os.environ.pop(BINARY_VARIABLE)
    # Detach: the parent's child exits at once (once it has said the
    # keeper's pid), the keeper lives on, adopted by init, in a session of
    # its own.
    keeper = os.fork()
    if keeper > 0:
        (data_dir / PID_FILE).write_text(f"{keeper}\n")
        os._exit(0)
    os.chdir("/")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    return keep(data_dir, socket_path_for(data_dir), binary, port)
