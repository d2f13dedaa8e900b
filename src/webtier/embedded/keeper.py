"""The keeper: a small daemon that runs the shared redis-server for a data
directory, restarts it if it dies, and stops it when its last user is gone.

The first webtier process to need the server starts the keeper (under the
start lock) and returns; the keeper detaches (a session of its own, its
parent gone), so no user process takes the server down with it. Every
``CHECK_EVERY`` seconds it counts the live leases (see
:mod:`webtier.embedded.leases`); when none is left, e.g. the last user was
killed with ``kill -9``, it stops the server with ``SHUTDOWN SAVE``. A user
leaving normally does that itself at once. When a user comes, leaves or
dies, it also closes a TCP port no living user asked for.

A server killed by a signal (``kill -9``, the OOM killer, a crash) while
users are left is started again on its data directory: it reloads its
append-only file, so it comes back with what it had written (up to the last
second, ``appendfsync everysec``). A server that exits by itself (``SHUTDOWN``,
e.g. ``webtier server stop``, or an error at start) is not. If the keeper
itself is killed, the kernel sends the server SIGTERM (``PR_SET_PDEATHSIG``):
redis-server flushes its append-only file as it exits, and the next webtier
process to need it starts a new keeper.

What happened last is in ``server.state`` (see :func:`last_event`), for
``webtier server`` to report.

Run as ``python -m webtier.embedded DATA_DIR PORT``, the redis-server
to run in ``$WEBTIER_KEEPER_REDIS_SERVER``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from webtier.embedded.binary import die_with_parent, socket_path_for
from webtier.embedded.leases import lease_files, live_leases, start_lock, wanted_ports
from webtier.embedded.password import password_of
from webtier.embedded.wire import config_get, config_set, is_gone, shutdown_save

CHECK_EVERY = 0.25  # seconds between two counts of the leases
BINARY_VARIABLE = "WEBTIER_KEEPER_REDIS_SERVER"
PID_FILE = "keeper.pid"  # written by the keeper's parent, before it exits
STATE_FILE = "server.state"  # the keeper's last word about the server
LOOPBACK = "127.0.0.1 -::1"  # the only addresses a TCP port listens on
# A server that died this many times within RESTART_WINDOW seconds is left
# dead: something kills it as fast as it starts, and restarting hides that.
RESTART_LIMIT = 5
RESTART_WINDOW = 60.0


def server_arguments(binary: str, data_dir: Path, socket_path: Path, port: int) -> list[str]:
    """redis-server's command line: a unix socket (owner-only), TCP on
    loopback only if ``port``, append-only persistence. The password and the
    bind addresses come on stdin (:func:`server_settings`): a command line is
    public (``ps``), and redis-server 6.2 reads a multi-address ``--bind`` as
    one address."""
    return [
        binary,
        "-",  # settings on stdin, then these
        "--port", str(port),
        "--unixsocket", str(socket_path),
        "--unixsocketperm", "700",
        "--dir", str(data_dir),
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--save", "",
        "--daemonize", "no",
        "--logfile", str(data_dir / "redis.log"),
    ]  # fmt: skip


def server_settings(password: str) -> bytes:
    return f"requirepass {password}\nbind {LOOPBACK}\nprotected-mode yes\n".encode()


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


def keeper_alive(data_dir: Path) -> bool:
    """Whether the keeper of ``data_dir`` runs (its pid file names a live
    process that is a keeper, not a stranger who got the pid again)."""
    try:
        pid = int((data_dir / PID_FILE).read_text())
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    return not is_gone(pid) and b"webtier.embedded" in command


def last_event(data_dir: Path) -> str:
    """The keeper's last word: ``running PID``, ``restarted PID after
    WHAT``, ``stopped`` (the server exited by itself, code 0), ``exited
    CODE`` or ``left dead after WHAT`` (nobody restarts it); "" if none."""
    try:
        return (data_dir / STATE_FILE).read_text().strip()
    except FileNotFoundError:
        return ""


def last_server_pid(event: str) -> int | None:
    """The pid a ``running``/``restarted`` event names."""
    words = event.split()
    return int(words[1]) if words[:1] in (["running"], ["restarted"]) else None


def _say(data_dir: Path, event: str) -> None:
    temporary = data_dir / f"{STATE_FILE}.tmp"
    temporary.write_text(event + "\n")
    temporary.replace(data_dir / STATE_FILE)
    print(time.strftime("%Y-%m-%d %H:%M:%S"), event, file=sys.stderr, flush=True)


def close_unwanted_port(data_dir: Path, socket_path: Path, password: str | None) -> None:
    """Closes the server's TCP port if no living user asked for it (a
    ``webtier server --port`` that left, or was killed)."""
    wanted = wanted_ports(data_dir)
    port = int(config_get(socket_path, password, "port") or 0)
    if port and port not in wanted:
        config_set(socket_path, password, "port", min(wanted, default=0))


def _start(binary: str, data_dir: Path, socket_path: Path, port: int) -> subprocess.Popen[bytes]:
    password = password_of(data_dir, create=True)
    assert password is not None  # just made
    server = subprocess.Popen(
        server_arguments(binary, data_dir, socket_path, port),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent if sys.platform == "linux" else None,
    )
    assert server.stdin is not None
    with server.stdin:
        server.stdin.write(server_settings(password))
    return server


def _watch(server: subprocess.Popen[bytes], data_dir: Path, socket_path: Path) -> int:
    """Waits until the server exits, stopping it when no lease is left and
    closing ports nobody wants; its exit code."""
    password = password_of(data_dir)
    users = -1
    while server.poll() is None:
        time.sleep(CHECK_EVERY)
        with start_lock(data_dir, wait=False) as locked:
            if not locked or server.poll() is not None:
                continue
            files = lease_files(data_dir)
            count = live_leases(data_dir)
            if count == 0:
                shutdown_save(socket_path, password)
            elif count != users or files != count:  # a user came, left or died
                with contextlib.suppress(OSError):  # still loading its data: next time
                    close_unwanted_port(data_dir, socket_path, password)
                    users = count
    return server.wait()


def keep(data_dir: Path, socket_path: Path, binary: str, port: int) -> int:
    """Runs the server until it exits by itself or no lease is left,
    restarting it if it is killed; its last exit code."""
    server = _start(binary, data_dir, socket_path, port)
    _say(data_dir, f"running {server.pid}")
    terminated = False

    def terminate(*_: object) -> None:
        nonlocal terminated
        terminated = True
        server.terminate()

    signal.signal(signal.SIGTERM, terminate)
    deaths: list[float] = []
    while True:
        code = _watch(server, data_dir, socket_path)
        if code >= 0 or terminated:
            _say(data_dir, "stopped" if code == 0 else f"exited {code}")
            return code
        cause = f"pid {server.pid} was killed by {signal.Signals(-code).name}"
        now = time.monotonic()
        deaths = [t for t in deaths if t > now - RESTART_WINDOW] + [now]
        # Without the start lock: a process that holds it and finds the
        # server silent waits for a living keeper (see EmbeddedRedis.start).
        if live_leases(data_dir, reclaim=False) == 0 or len(deaths) > RESTART_LIMIT:
            _say(data_dir, f"left dead after {cause}")
            return code
        server = _start(binary, data_dir, socket_path, min(wanted_ports(data_dir), default=0))
        _say(data_dir, f"restarted {server.pid} after {cause}")


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
