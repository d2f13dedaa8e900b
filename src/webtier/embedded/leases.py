"""The files in a data directory that say who uses its embedded server.

Two kinds of ``flock`` locks, both released by the kernel when their process
dies, even by ``kill -9``:

- ``server.lock``, the *start lock*: held while a process starts the server,
  joins it, leaves it or stops it, so two processes starting at the same
  instant start one server, and none joins a server that is shutting down.
- ``leases/*.lease``, one per user: a process holds an exclusive lock on its
  lease while it uses the server. A lease file nobody holds locked belongs
  to a dead process: it is *stale*, and reclaimed (deleted) when counted.
  It holds the TCP port its process asked for (0: none), so the port stays
  open exactly while a living process wants it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from webtier.errors import EmbeddedServerError

START_LOCK_TIMEOUT = 60.0  # seconds: longer than any start or shutdown


@contextlib.contextmanager
def start_lock(data_dir: Path, *, wait: bool = True) -> Iterator[bool]:
    """Holds the data directory's start lock in the block; yields False
    (without it) if ``wait`` is False and another process holds it."""
    with _files_of(data_dir):
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        opened = (data_dir / "server.lock").open("wb")
    with opened as lock:
        deadline = time.monotonic() + (START_LOCK_TIMEOUT if wait else 0)
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    if not wait:
                        yield False
                        return
                    raise EmbeddedServerError(
                        f"{data_dir}: another process held the start lock for "
                        f"{START_LOCK_TIMEOUT:.0f} s"
                    ) from None
                time.sleep(0.02)
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def _files_of(data_dir: Path) -> Iterator[None]:
    """Making the data directory's files: an OSError (a directory not
    writable, a file in its place) is an EmbeddedServerError naming it."""
    try:
        yield
    except OSError as error:
        raise EmbeddedServerError(
            f"cannot use the data directory {data_dir}: {error.strerror or error} "
            "(give a writable --data-dir)"
        ) from error


class Lease:
    """This process's claim on the server: a locked file in ``leases/``."""

    def __init__(self, data_dir: Path, port: int = 0) -> None:
        folder = data_dir / "leases"
        with _files_of(data_dir):
            folder.mkdir(exist_ok=True, mode=0o700)
            handle, name = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".lease", dir=folder)
        self.path = Path(name)
        self.pid = os.getpid()  # a forked child inherits the lock, not the lease
        self._file: IO[bytes] | None = os.fdopen(handle, "wb")
        fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._file.write(b"%d\n" % port)
        self._file.flush()

    @property
    def held(self) -> bool:
        return self._file is not None

    def release(self) -> None:
        """Deletes the lease, then unlocks it (idempotent). In a forked child
        it only closes the child's copy: the parent's lease stands."""
        file, self._file = self._file, None
        if file is None:
            return
        if os.getpid() == self.pid:
            self.path.unlink(missing_ok=True)
        file.close()


def live_leases(data_dir: Path, *, reclaim: bool = True) -> int:
    """How many leases are held by living processes; the stale ones are
    deleted if ``reclaim`` (do it under the start lock)."""
    return len(_live_ports(data_dir, reclaim=reclaim))


def lease_files(data_dir: Path) -> int:
    """How many lease files there are, live and stale."""
    return sum(1 for _ in (data_dir / "leases").glob("*.lease"))


def wanted_ports(data_dir: Path) -> set[int]:
    """The TCP ports the living users asked for (none: the socket only)."""
    return {port for port in _live_ports(data_dir, reclaim=False) if port}


def _live_ports(data_dir: Path, *, reclaim: bool) -> list[int]:
    ports = []
    for path in (data_dir / "leases").glob("*.lease"):
        try:
            file = path.open("rb")
        except FileNotFoundError:
            continue
        with file:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                text = file.read().strip()
                ports.append(int(text) if text.isdigit() else 0)
                continue
            if reclaim:
                path.unlink(missing_ok=True)
    return ports
