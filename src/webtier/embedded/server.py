""":class:`EmbeddedRedis`: a process's use of the shared embedded server."""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path

from webtier.embedded import keeper
from webtier.embedded.binary import default_data_dir, find_redis_server, socket_path_for
from webtier.embedded.leases import Lease, live_leases, start_lock
from webtier.embedded.wire import answers_ping, is_gone, shutdown_save
from webtier.errors import EmbeddedServerError

_START_TIMEOUT = 15.0  # seconds


class EmbeddedRedis:
    """The redis-server shared by every webtier process using ``data_dir``.

    :meth:`start` joins it, starting it first if it is not running: it runs
    detached, under a keeper (:mod:`webtier.embedded.keeper`), so it belongs
    to no single process. While started, this object holds a lease (see
    :mod:`webtier.embedded.leases`); :meth:`stop` gives it back, and the last
    process to leave stops the server with ``SHUTDOWN SAVE``. ``port``: also
    listen on TCP, on 127.0.0.1 only (0: the unix socket only).
    """

    def __init__(
        self, data_dir: str | Path | None = None, *, binary: str | None = None, port: int = 0
    ) -> None:
        self.data_dir = (Path(data_dir) if data_dir else default_data_dir()).resolve()
        self.binary = binary
        self.port = port
        self.owner = False  # True if this object started the server
        self._lease: Lease | None = None

    @property
    def socket_path(self) -> Path:
        return socket_path_for(self.data_dir)

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def running(self) -> bool:
        """Whether the server answers (whoever started it)."""
        return answers_ping(self.socket_path)

    def start(self) -> EmbeddedRedis:
        """Joins the server, starting it if it is not running (once: a
        second call does nothing)."""
        if self._lease is not None:
            return self
        binary = find_redis_server(self.binary)
        with start_lock(self.data_dir):
            lease = Lease(self.data_dir)
            try:
                if self.running:
                    self._check_port()
                else:
                    self._wait_ready(keeper.launch(binary, self.data_dir, self.port))
                    self.owner = True
            except BaseException:
                lease.release()
                raise
        self._lease = lease
        atexit.register(self.stop)
        return self

    def _check_port(self) -> None:
        if not self.port:
            return
        import redis  # only to ask for the port: the keeper stays light

        client = redis.Redis(unix_socket_path=str(self.socket_path))
        try:
            if int(client.config_get("port").get("port") or 0) != self.port:
                client.config_set("port", self.port)
        except redis.RedisError as error:
            raise EmbeddedServerError(
                f"the embedded redis-server already runs without TCP port {self.port} "
                f"and cannot add it ({error}): stop it (webtier server stop) and start again"
            ) from error
        finally:
            client.close()

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
        its data saved. A forked child leaves its parent's lease alone."""
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
                shutdown_save(self.socket_path)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_server(data_dir: Path) -> bool:
    """Stops the server of ``data_dir`` whoever uses it (``SHUTDOWN SAVE``);
    False if it was not running."""
    path = socket_path_for(data_dir)
    with start_lock(data_dir.resolve()):
        if not answers_ping(path):
            return False
        shutdown_save(path)
        return True
