"""A throwaway PostgreSQL server for tests and benchmarks.

:class:`PostgresServer` runs ``initdb`` and ``postgres`` from the machine's
PostgreSQL binaries (on ``PATH``, else the newest ``/usr/lib/postgresql/*/bin``)
in a temporary directory, on a free loopback port, with durability turned
off (it is for tests), trust authentication for the ``postgres`` role, and
no unix socket outside its directory. PostgreSQL refuses to run as root, so
as root the server runs as the ``postgres`` user if there is one, else as
``nobody``. A killed owner takes the server along (Linux), as with
:class:`webtier.testing.RedisServer`.

    with PostgresServer.start() as pg:
        engine = sqlalchemy.create_engine(pg.url)
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webtier._core.extras import extra_needed
from webtier.embedded import die_with_parent
from webtier.errors import EmbeddedServerError
from webtier.testing.redis_servers import free_port

_READY_TIMEOUT = 60.0  # seconds


def find_postgres_bin() -> Path | None:
    """The directory of ``initdb`` and ``postgres``, or None."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    versions = []
    for candidate in Path("/usr/lib/postgresql").glob("*/bin/initdb"):
        match = re.fullmatch(r"\d+(\.\d+)?", candidate.parent.parent.name)
        if match:
            versions.append((float(candidate.parent.parent.name), candidate.parent))
    return max(versions)[1] if versions else None


def _unprivileged_user() -> pwd.struct_passwd | None:
    """Who runs the server: this process's user, unless that is root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise EmbeddedServerError("running as root, and there is no postgres or nobody user")


@dataclass
class PostgresServer:
    """One ``postgres`` process on 127.0.0.1:``port``, its data in ``directory``."""

    bindir: Path
    directory: Path
    port: int
    user: pwd.struct_passwd | None = None
    process: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(cls, bindir: Path | None = None) -> PostgresServer:
        found = bindir or find_postgres_bin()
        if found is None:
            raise EmbeddedServerError(
                "no PostgreSQL binaries (initdb) on PATH nor in /usr/lib/postgresql/*/bin: "
                "install PostgreSQL (e.g. apt install postgresql), or give the URL of a server"
            )
        user = _unprivileged_user()
        server = cls(found, Path(tempfile.mkdtemp(prefix="webtier-pg-")), free_port(), user)
        try:
            if user is not None:
                os.chown(server.directory, user.pw_uid, user.pw_gid)
            init = subprocess.run(
                [str(found / "initdb"), "-D", str(server.data), "-U", "postgres",
                 "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
                capture_output=True, text=True, cwd=server.directory, check=False,
                **server._as_user(),
            )  # fmt: skip
            if init.returncode != 0:
                raise EmbeddedServerError(f"initdb failed:\n{init.stdout}\n{init.stderr}")
            server.launch()
        except BaseException:
            server.stop()
            raise
        return server

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def _as_user(self) -> dict[str, Any]:
        if self.user is None:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def launch(self) -> None:
        """(Re)start the server on the same port and data."""
        log = (self.directory / "postgres.log").open("ab")
        with log:
            if self.user is not None:
                os.fchown(log.fileno(), self.user.pw_uid, self.user.pw_gid)
            self.process = subprocess.Popen(
                [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1",
                 "-c", f"unix_socket_directories={self.directory}",
                 # A test server: speed over durability.
                 "-c", "fsync=off",
                 "-c", "full_page_writes=off"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.directory,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
                **self._as_user(),
            )  # fmt: skip
        self._wait_ready()

    @property
    def url(self) -> str:
        """A SQLAlchemy URL (psycopg 3) of the ``postgres`` database."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _wait_ready(self) -> None:
        with extra_needed("postgres", "a PostgreSQL test server"):
            import psycopg

        deadline = time.monotonic() + _READY_TIMEOUT
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                tail = (self.directory / "postgres.log").read_text(errors="replace")[-1500:]
                raise EmbeddedServerError(f"postgres exited:\n{tail}")
            try:
                psycopg.connect(
                    host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                    connect_timeout=2,
                ).close()  # fmt: skip
                return
            except psycopg.OperationalError as error:
                last = error
                time.sleep(0.1)
        raise EmbeddedServerError(f"timed out waiting for postgres on {self.port}: {last}")

    def kill(self) -> None:
        """Stop the server at once (SIGQUIT, PostgreSQL's immediate shutdown:
        clients are cut off, nothing is flushed), keeping its data."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def stop(self) -> None:
        """Kill the server and remove its files."""
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
