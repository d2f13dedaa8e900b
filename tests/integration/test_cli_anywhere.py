"""Global options after the command as well as before it; shell completion;
``sessions revoke``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import webtier
from tests.helpers.cli import webtier_cli

pytestmark = pytest.mark.onlynoncluster  # option parsing, not routing


def test_global_options_work_after_the_command(redis_url: str, prefix: str, tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/shop.db"
    ran = webtier_cli("rows", "init", "--items", "3", "--database", database)
    assert (ran.code, ran.stdout) == (0, f"{database}: 3 items added\n")
    where = ("--url", redis_url, "--prefix", prefix)
    ran = webtier_cli("rows", "schedule", "1", "--delay", "30", *where, "--database", database)
    assert (ran.code, ran.stdout) == (0, "1 items scheduled\n")
    ran = webtier_cli("rows", "status", "--json", "--database", database, *where)
    assert json.loads(ran.stdout)["scheduled_rows"] == 1


def test_after_the_command_wins_over_before(redis_url: str, prefix: str) -> None:
    client = webtier.connect(redis_url)
    webtier.WebTier(client, webtier.Config(prefix=prefix)).counters.record("hits", 1)
    webtier.disconnect(client)
    ran = webtier_cli("--prefix", "elsewhere", "--url", redis_url, "counters", "list")
    assert ran.stdout == "no counters\n"
    ran = webtier_cli(
        "--prefix", "elsewhere", "counters", "list", "--url", redis_url, "--prefix", prefix
    )
    assert (ran.code, ran.stdout) == (0, "hits\n")
    # on a group's own command line too
    ran = webtier_cli("counters", "--url", redis_url, "--prefix", prefix, "list", "--json")
    assert json.loads(ran.stdout)["counters"] == ["hits"]


def test_sessions_revoke_ends_one_session(redis_url: str, prefix: str) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, webtier.Config(prefix=prefix))
    ended, kept = tier.sessions.new(user="ann"), tier.sessions.new(user="ann")
    where = ("--url", redis_url, "--prefix", prefix)
    try:
        ran = webtier_cli(*where, "sessions", "revoke", ended, "--yes")
        assert (ran.code, ran.stdout) == (0, "session ended\n")
        assert tier.sessions.info(ended) is None
        assert tier.sessions.info(kept) is not None
        ran = webtier_cli(*where, "sessions", "revoke", ended, "--yes")
        assert ran.code == 1
        assert "no live session has that token" in ran.stderr
    finally:
        webtier.disconnect(client)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_clicks_script(shell: str) -> None:
    ran = webtier_cli("completion", shell)
    assert ran.code == 0
    assert "_WEBTIER_COMPLETE" in ran.stdout
    assert f"{shell}_complete" in ran.stdout


def test_the_completion_script_completes_commands() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "webtier"],
        env={"_WEBTIER_COMPLETE": "bash_complete", "COMP_WORDS": "webtier ro", "COMP_CWORD": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "plain,rows" in done.stdout.splitlines()  # type,value: the bash protocol


def test_worker_once_reports_a_job_that_fails_and_exits(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    """``worker --once`` is a one-shot run: a job whose step fails (rows
    scheduled, their database unreadable) ends it with one error line and
    status 1, where it used to back off forever."""
    database = f"sqlite:///{tmp_path}/shop.db"
    where = ("--url", redis_url, "--prefix", prefix)
    assert webtier_cli("rows", "init", "--items", "3", "--database", database).code == 0
    ran = webtier_cli("rows", "schedule", "1", "--delay", "30", *where, "--database", database)
    assert ran.code == 0, ran
    (tmp_path / "shop.db").unlink()
    (tmp_path / "shop.db").mkdir()  # a directory: SQLite cannot open it
    ran = webtier_cli("worker", "--once", "--job", "rows", *where, "--database", database)
    assert ran.code == 1, ran
    assert ran.stderr.splitlines()[-1].startswith("error: worker --once: rows: "), ran
    ran = webtier_cli("worker", "--once", "--job", "counters", *where, "--database", database)
    assert ran.code == 0, ran  # the jobs that work still work
