"""``webtier rows`` and the worker's row refresh, through click's runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from webtier.cli import main

pytestmark = pytest.mark.onlynoncluster  # the CLI's cluster URLs are tested elsewhere


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def status(*base: str) -> list[int]:
    """Scheduled, due and loading rows, as ``rows status`` prints them."""
    code, out = run(*base, "rows", "status")
    assert code == 0, out
    assert out.splitlines()[0].split() == ["scheduled", "rows", "due", "rows", "loading", "rows"]
    return [int(figure) for figure in out.splitlines()[2].split()]


def test_init_schedule_refresh_show_invalidate(redis_url: str, prefix: str, tmp_path: Path) -> None:
    base = ["--url", redis_url, "--prefix", prefix, "--database", f"sqlite:///{tmp_path}/s.db"]
    assert run(*base, "rows", "init", "--items", "40") == (
        0,
        f"sqlite:///{tmp_path}/s.db: 40 items added\n",
    )
    assert run(*base, "rows", "init", "--items", "40")[1].endswith(": 0 items added\n")
    assert run(*base, "rows", "schedule", "1", "2", "--delay", "30") == (0, "2 items scheduled\n")
    assert run(*base, "rows", "schedule", "--all", "--delay", "30") == (0, "40 items scheduled\n")
    assert status(*base) == [40, 40, 0]
    code, out = run(*base, "rows", "refresh")
    assert (code, out.split(" in ")[0]) == (
        0,
        "40 due: 40 stored, 0 removed, 0 fenced, 0 dropped, 0 failed",
    )
    code, out = run(*base, "rows", "show", "2", "--json")
    assert code == 0
    shown = json.loads(out)["row"]
    assert shown["item_id"] == 2
    assert isinstance(shown["price"], str)  # a decimal, exact
    assert run(*base, "rows", "invalidate", "2", "3") == (0, "2 cached copies dropped\n")
    code, out = run(*base, "rows", "show", "2")
    assert (code, "not cached" in out) == (1, True)
    assert run(*base, "rows", "show", "2", "--load")[0] == 0
    assert run(*base, "rows", "schedule", "--all", "--delay", "0") == (0, "40 items unscheduled\n")
    assert status(*base) == [0, 0, 0]


def test_the_worker_refreshes_the_demo_database(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    base = ["--url", redis_url, "--prefix", prefix, "--data-dir", str(tmp_path)]
    assert run(*base, "rows", "init", "--items", "5")[0] == 0
    assert (tmp_path / "shop.db").exists()  # the default: shop.db in the data directory
    assert run(*base, "rows", "schedule", "--all", "--delay", "60")[0] == 0
    assert run(*base, "worker", "--once", "--job", "rows")[0] == 0
    assert status(*base) == [5, 0, 0]
    assert run(*base, "rows", "show", "5")[0] == 0


def test_database_errors_are_clean(redis_url: str, prefix: str, tmp_path: Path) -> None:
    base = ["--url", redis_url, "--prefix", prefix, "--database", f"sqlite:///{tmp_path}/none.db"]
    code, out = run(*base, "rows", "schedule", "--all", "--delay", "5")
    assert code == 1
    assert "none.db not found" in out  # a source never creates a SQLite file
    assert "Traceback" not in out
    assert run(*base, "rows", "schedule", "7", "--delay", "5")[0] == 0
    code, out = run(*base, "rows", "refresh")
    assert code == 1
    assert "loading 1 rows failed" in out
    code, out = run("--database", "nonsense://", "rows", "init")
    assert code == 1
    assert "Traceback" not in out
