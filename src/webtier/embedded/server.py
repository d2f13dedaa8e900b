""":class:`EmbeddedRedis`: a process's use of the shared embedded server."""

from __future__ import annotations

import atexit
import logging
import os
import time
from pathlib import Path
from typing import Literal

from webtier.embedded import keeper
from webtier.embedded.binary import (
    default_data_dir,
    find_redis_server,
    has_data,
    socket_path_for,
)
from webtier.embedded.leases import Lease, live_leases, start_lock, wanted_ports
from webtier.embedded.password import password_of
from webtier.embedded.wire import (
    answers_ping,
    config_get,
    config_set,
    is_gone,
    shutdown_save,
    wait_gone,
)
from webtier.errors import EmbeddedServerError

_LOG = logging.getLogger(__name__)
_START_TIMEOUT = 15.0  # seconds
_LOOPBACK = frozenset({"127.0.0.1", "::1", "-::1", "localhost"})


class EmbeddedRedis:
    """The redis-server shared by every webtier process using ``data_dir``.

    :meth:`start` joins it, starting it first if it is not running: it runs
    detached, under a keeper (:mod:`webtier.embedded.keeper`), so it belongs
    to no single process. While started, this object holds a lease (see
    :mod:`webtier.embedded.leases`); :meth:`stop` gives it back, and the last
    process to leave stops the server with ``SHUTDOWN SAVE``. ``port``: also
    listen on TCP, on loopback only (127.0.0.1 and ::1), while this process
    uses the server (0: the unix socket only). Every connection needs the
    password kept in the data directory (:attr:`url` carries it).
    """

    def __init__(
        self, data_dir: str | Path | None = None, *, binary: str | None = None, port: int = 0
    ) -> None:
        self.data_dir = (Path(data_dir) if data_dir else default_data_dir()).resolve()
        self.binary = binary
        self.port = port
        self.owner = False  # True if this object started the server
        self.new_data_dir = False  # True if it started it on a data directory with no data
        self._lease: Lease | None = None
        self._seen = ""  # the keeper's last event this object has reported

    @property
    def socket_path(self) -> Path:
        return socket_path_for(self.data_dir)

    @property
    def password(self) -> str | None:
        """The server's password (None for a server started by a webtier
        older than the password)."""
        return password_of(self.data_dir)

    @property
    def url(self) -> str:
        """The unix socket's URL, with the password."""
        password = self.password
        return (
            f"unix://:{password}@{self.socket_path}" if password else f"unix://{self.socket_path}"
        )

    @property
    def tcp_url(self) -> str | None:
        """``redis://`` on the TCP port this object asked for, with the password."""
        if not self.port:
            return None
        password = self.password
        auth = f":{password}@" if password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        """Whether the server answers (whoever started it)."""
        return answers_ping(self.socket_path, self.password)

    def start(self) -> EmbeddedRedis:
        """Joins the server, starting it if it is not running (once: a
        second call does nothing)."""
        if self._lease is not None:
            return self
        binary = find_redis_server(self.binary)
        with start_lock(self.data_dir):
            lease = Lease(self.data_dir, self.port)
            try:
                if self._answers_or_comes_back():
                    self._open_port()
                else:
                    self.new_data_dir = not has_data(self.data_dir)
                    password_of(self.data_dir, create=True)
                    self._wait_ready(keeper.launch(binary, self.data_dir, self.port))
                    self.owner = True
                    if self.new_data_dir:
                        # Said, not silent: a mistyped data directory would
                        # otherwise look like a server whose data is gone.
                        _LOG.warning(
                            "started a new embedded redis-server, with no data yet, in %s",
                            self.data_dir,
                        )
            except BaseException:
                lease.release()
                raise
        self._lease = lease
        self._seen = keeper.last_event(self.data_dir)
        atexit.register(self.stop)
        return self

    def _answers_or_comes_back(self) -> bool:
        """Whether the server answers, after its keeper, if alive, restarted
        it (a server killed a moment ago) or left (one stopping). When not,
        the last server is gone too: a keeper killed leaves its server
        saving its data, which no second server may write at once."""
        deadline = time.monotonic() + _START_TIMEOUT
        while not self.running:
            if not keeper.keeper_alive(self.data_dir) or time.monotonic() > deadline:
                pid = keeper.last_server_pid(keeper.last_event(self.data_dir))
                if pid is not None:
                    wait_gone(pid, _START_TIMEOUT)
                return False
            time.sleep(0.02)
        return True

    def check(self) -> tuple[Literal["running", "stopped", "down"], str]:
        """Whether the server runs (``running``), was stopped on purpose
        or stays down, and what happened since the last check, in one line
        ("" if nothing). A server killed is restarted by its keeper (this
        waits for it); a keeper killed took its server down, and this starts
        both again; a server stopped on purpose (SHUTDOWN, ``webtier server
        stop``) or left dead stays down."""
        if self._lease is None:
            raise EmbeddedServerError("check() is for a started EmbeddedRedis")
        if self.running:
            return "running", self._news()
        with start_lock(self.data_dir):
            if self._answers_or_comes_back():
                return "running", self._news() or "redis-server did not answer for a while"
            event = keeper.last_event(self.data_dir)
            if event == "stopped":
                return "stopped", "the server was stopped (SHUTDOWN, e.g. webtier server stop)"
            if keeper.last_server_pid(event) is None:  # left dead, or exited with an error
                log = self.data_dir / "redis.log"
                return "down", f"redis-server is down and stays down ({event}; see {log})"
            port = min(wanted_ports(self.data_dir), default=0)
            self._wait_ready(keeper.launch(find_redis_server(self.binary), self.data_dir, port))
            self._open_port()
        self._seen = keeper.last_event(self.data_dir)
        return "running", (
            "the server's keeper died, and redis-server with it; both started again, "
            "the data reloaded from disk"
        )

    def _news(self) -> str:
        event, self._seen = self._seen, keeper.last_event(self.data_dir)
        if self._seen == event or not self._seen.startswith("restarted "):
            return ""
        pid, _, cause = self._seen.removeprefix("restarted ").partition(" after ")
        return f"redis-server {cause}; its keeper restarted it (pid {pid}), its data reloaded"

    def _open_port(self) -> None:
        """Listens on ``self.port`` if asked, on loopback only, and checks
        that the server does: a server started by an older webtier may
        listen on every interface."""
        if not self.port:
            return
        path, password = self.socket_path, self.password
        try:
            current = int(config_get(path, password, "port") or 0)
            if current != self.port:
                others = wanted_ports(self.data_dir) - {self.port}
                if current in others:
                    raise EmbeddedServerError(
                        f"the embedded redis-server listens on TCP port {current} for another "
                        f"webtier process: use --port {current}, or none"
                    )
                config_set(path, password, "bind", keeper.LOOPBACK)  # before any port opens
                config_set(path, password, "port", self.port)
            bound = config_get(path, password, "bind").split()
        except OSError as error:
            raise EmbeddedServerError(
                f"the embedded redis-server cannot listen on TCP port {self.port} ({error}): "
                "stop it (webtier server stop) and start again"
            ) from error
        if not bound or not set(bound) <= _LOOPBACK:
            raise EmbeddedServerError(
                f"the embedded redis-server binds {' '.join(bound) or 'every interface'}, "
                "not loopback only: stop it (webtier server stop) and start again"
            )

    def _wait_ready(self, keeper_pid: int) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self.running:
                return
            if is_gone(keeper_pid):  # the server exited at start: its log says why
                break
            time.sleep(0.02)
        else:
            raise EmbeddedServerError(
                f"redis-server did not answer on {self.socket_path} in {_START_TIMEOUT} s "
                f"(see {self.data_dir / 'redis.log'})"
            )
        raise EmbeddedServerError(f"redis-server could not start: {self._last_log_line()}")

    def _last_log_line(self) -> str:
        log = self.data_dir / "redis.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        # Its lines: "pid:role date time * message" ("#" marks a warning).
        return lines[-1].split(" # ", 1)[-1] if lines else f"see {log}"

    def stop(self) -> None:
        """Leaves the server (idempotent); the last process to leave stops it,
        its data saved, and a TCP port no one else asked for closes. A forked
        child leaves its parent's lease alone."""
        atexit.unregister(self.stop)
        lease, self._lease = self._lease, None
        self.owner = False
        if lease is None:
            return
        if lease.pid != os.getpid():
            lease.release()
            return
        with start_lock(self.data_dir):
            lease.release()
            if live_leases(self.data_dir) == 0:
                shutdown_save(self.socket_path, self.password)
            elif self.port and self.running:
                keeper.close_unwanted_port(self.data_dir, self.socket_path, self.password)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_server(data_dir: Path) -> bool:
    """Stops the server of ``data_dir`` whoever uses it (``SHUTDOWN SAVE``);
    False if it was not running."""
    data_dir = data_dir.resolve()
    path, password = socket_path_for(data_dir), password_of(data_dir)
    with start_lock(data_dir):
        if not answers_ping(path, password):
            return False
        shutdown_save(path, password)
        return True
