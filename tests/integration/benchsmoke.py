"""Running a ``webtier bench`` subcommand end to end with tiny sizes, for the
benchmarks' smoke tests: they check rows and clean-up, never a timing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from benchmarks.cli import bench
from webtier.testing import RedisServer


def run_smoke(
    server: RedisServer, db: int, tmp_path: Path, name: str, rows: list[str], scale: float
) -> dict[str, Any]:
    """Run bench ``name`` on databases ``db`` and ``db + 1`` of ``server`` (no
    other test may use them), check that it reports exactly ``rows`` and
    flushed both databases on the way out; return its JSON report."""
    url = f"redis://127.0.0.1:{server.port}/{db}"
    out = tmp_path / f"{name}.json"
    args = [name, "--url", url, "--seconds", "0.2", "--repeat", "1", "--processes", "1,2"]
    args += ["--scale", str(scale), "--json", str(out), "--markdown"]

    result = CliRunner().invoke(bench, args)

    assert result.exit_code == 0, result.output
    for row in rows:
        assert f"| {row} |" in result.stdout
    saved: dict[str, Any] = json.loads(out.read_text())
    assert {row["what"] for row in saved["rows"]} == set(rows)
    for number in (db, db + 1):
        client = server.client(db=number)
        try:
            assert client.dbsize() == 0
        finally:
            client.close()
    return saved
