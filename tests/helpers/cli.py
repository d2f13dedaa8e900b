"""The command line and the benchmarks in tests: ``webtier`` through
click's runner or as a process of its own, and the benchmarks' smoke runs
on databases of their own."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from benchmarks.cli import bench
from webtier.testing import RedisServer


@dataclass(frozen=True)
class Ran:
    """What one run of the webtier command gave."""

    code: int
    stdout: str
    stderr: str


def webtier_cli(*args: str) -> Ran:
    """The webtier command through click's runner, stdout and stderr apart."""
    from click.testing import CliRunner

    from webtier.cli import main

    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def run_smoke(
    server: RedisServer, db: int, tmp_path: Path, name: str, rows: list[str], scale: float
) -> dict[str, Any]:
    """Run bench ``name`` on databases ``db`` and ``db + 1`` of ``server`` (no
    other test may use them), check that it reports exactly ``rows`` and
    flushed both databases on the way out; return its JSON report."""
    args = ["--seconds", "0.2", "--processes", "1,2", "--scale", str(scale)]
    result, saved = run_bench_cli(server, db, tmp_path, name, *args)
    for row in rows:
        assert f"| {row} |" in result.stdout
    assert {row["what"] for row in saved["rows"]} == set(rows)
    return saved


def run_bench_cli(
    server: RedisServer, db: int, tmp_path: Path, name: str, *args: str
) -> tuple[Result, dict[str, Any]]:
    """Run ``webtier bench name`` once (``--repeat 1``, Markdown) with ``args``
    on databases ``db`` and ``db + 1`` of ``server`` (no other test may use
    them); check it succeeded and flushed both on the way out; return its
    output and its JSON report."""
    url = f"redis://127.0.0.1:{server.port}/{db}"
    out = tmp_path / f"{name}.json"
    line = [name, "--url", url, "--repeat", "1", *args, "--json", str(out), "--markdown"]

    result = CliRunner().invoke(bench, line)

    assert result.exit_code == 0, result.output
    for number in (db, db + 1):
        client = server.client(db=number)
        try:
            assert client.dbsize() == 0
        finally:
            client.close()
    saved: dict[str, Any] = json.loads(out.read_text())
    return result, saved


def fresh_machine(tmp_path: Path) -> dict[str, str]:
    """The environment of a user with no webtier data yet."""
    return {
        **os.environ,
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "200",
    }


def read_until(
    program: subprocess.Popen[str], pattern: re.Pattern[str], shown: list[str]
) -> re.Match[str]:
    """Read ``program``'s output into ``shown`` up to the first line that
    matches ``pattern``; fail the test if its output ends first."""
    assert program.stdout is not None
    for line in program.stdout:
        shown.append(line)
        if found := pattern.search(line):
            return found
    pytest.fail(f"no line matching {pattern.pattern!r}:\n" + "".join(shown))
