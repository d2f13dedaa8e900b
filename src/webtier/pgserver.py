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

from webtier.embedded import die_with_parent
from webtier.errors import EmbeddedServerError
from webtier.testing import free_port

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
    """One ``postgres`` process on 127.0.0.1:``port``."""

    directory: Path
    port: int
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, bindir: Path | None = None) -> PostgresServer:
        found = bindir or find_postgres_bin()
        if found is None:
            raise EmbeddedServerError(
                "no PostgreSQL binaries (initdb) on PATH nor in /usr/lib/postgresql/*/bin: "
                "install PostgreSQL (e.g. apt install postgresql), or give the URL of a server"
            )
        user = _unprivileged_user()
        directory = Path(tempfile.mkdtemp(prefix="webtier-pg-"))
        uid: int | None = None
        gid: int | None = None
        extra_groups: list[int] | None = None
        if user is not None:
            os.chown(directory, user.pw_uid, user.pw_gid)
            uid, gid, extra_groups = user.pw_uid, user.pw_gid, []
        data = directory / "data"
        try:
            init = subprocess.run(
                [str(found / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                 "-E", "UTF8", "--locale=C", "--no-sync"],
                capture_output=True, text=True, cwd=directory, check=False,
                user=uid, group=gid, extra_groups=extra_groups,
            )  # fmt: skip
            if init.returncode != 0:
                raise EmbeddedServerError(f"initdb failed:\n{init.stdout}\n{init.stderr}")
            port = free_port()
            log = (directory / "postgres.log").open("wb")
            if user is not None:
                os.fchown(log.fileno(), user.pw_uid, user.pw_gid)
            with log:
                process = subprocess.Popen(
                    [str(found / "postgres"), "-D", str(data), "-p", str(port),
                     "-c", "listen_addresses=127.0.0.1",
                     "-c", f"unix_socket_directories={directory}",
                     # A test server: speed over durability.
                     "-c", "fsync=off", "-c", "synchronous_commit=off",
                     "-c", "full_page_writes=off"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=directory,
                    preexec_fn=die_with_parent if sys.platform == "linux" else None,
                    user=uid, group=gid, extra_groups=extra_groups,
                )  # fmt: skip
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        server = cls(directory, port, process)
        try:
            server._wait_ready()
        except BaseException:
            server.stop()
            raise
        return server

    @property
    def url(self) -> str:
        """A SQLAlchemy URL (psycopg 3) of the ``postgres`` database."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + _READY_TIMEOUT
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
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

    def stop(self) -> None:
        """Stop the server at once (SIGQUIT: immediate shutdown) and remove its files."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
