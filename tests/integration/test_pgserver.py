"""webtier.testing.pgserver: the throwaway PostgreSQL the row cache tests and bench use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from webtier.errors import EmbeddedServerError
from webtier.testing.pgserver import PostgresServer, find_postgres_bin


def test_binaries_are_found_off_path_too(monkeypatch: pytest.MonkeyPatch) -> None:
    on_path = find_postgres_bin()
    if on_path is None:
        pytest.skip("no PostgreSQL binaries on this machine")
    monkeypatch.setenv("PATH", "/nonexistent")
    found = find_postgres_bin()
    # Packages put them in /usr/lib/postgresql/<version>/bin, not on PATH.
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        assert found is None
    else:
        assert found is not None
        assert (found / "postgres").exists()


def test_a_server_of_its_own_survives_a_kill_and_runs_unprivileged() -> None:
    try:
        server = PostgresServer.start()
    except EmbeddedServerError as error:  # no binaries: skipped here, failed in CI
        pytest.skip(f"cannot start PostgreSQL: {error}")
    with server:
        engine = sa.create_engine(server.url, poolclass=sa.NullPool)
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE kept (x int)"))
            conn.execute(sa.text("INSERT INTO kept VALUES (7)"))
        assert server.process is not None
        owner = Path(f"/proc/{server.process.pid}").stat().st_uid
        assert owner != 0 or os.geteuid() != 0  # PostgreSQL refuses root
        server.kill()
        server.launch()  # the same port and data: committed rows are still there
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT x FROM kept")).scalar() == 7
        engine.dispose()
        directory = server.directory
    assert not directory.exists()
