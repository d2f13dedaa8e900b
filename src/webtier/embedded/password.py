"""The embedded server's password: made on its first start, kept in
``password`` in its data directory, readable by its owner only (0600).

Every connection to the server authenticates, on the unix socket as on TCP
(Redis has one password for both): a TCP port, even on loopback only, is
open to every local user and to any web page that makes the browser send a
request there, and the password keeps them out."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

PASSWORD_FILE = "password"  # noqa: S105 - a file name, not a password


def password_path(data_dir: Path) -> Path:
    return data_dir / PASSWORD_FILE


def password_of(data_dir: Path, *, create: bool = False) -> str | None:
    """The password of ``data_dir``'s server; None if it has none yet (a
    server never started by this version), unless ``create`` makes one."""
    path = password_path(data_dir)
    if create:
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(handle, "w") as file:
                file.write(secrets.token_hex(32) + "\n")
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_IMODE(mode) & 0o077:  # loosened by hand: owner-only again
        path.chmod(0o600)
    return path.read_text().strip() or None
