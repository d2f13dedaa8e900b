"""The webtier command, through click's runner and as a real process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

import webtier
from webtier.cli import main

NOW = 1_700_000_000


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_counters_list_and_show(redis_url: str, prefix: str) -> None:
    client = webtier.connect(redis_url)
    webtier.WebTier(client, webtier.Config(prefix=prefix)).counters.record("views:/", 7, now=NOW)
    webtier.disconnect(client)
    code, out = run("--url", redis_url, "--prefix", prefix, "counters", "list")
    assert (code, out) == (0, "views:/\n")
    code, out = run(
        "--url",
        redis_url,
        "--prefix",
        prefix,
        "counters",
        "show",
        "views:/",
        "--precision",
        "86400",
    )
    assert code == 0
    assert out.rstrip().endswith("  7")


def test_unknown_precision_is_a_clean_error(redis_url: str, prefix: str) -> None:
    code, out = run(
        "--url", redis_url, "--prefix", prefix, "counters", "show", "x", "--precision", "7"
    )
    assert code == 1
    assert "precision" in out
    assert "Traceback" not in out


def test_worker_once(redis_url: str, prefix: str) -> None:
    code, out = run("--url", redis_url, "--prefix", prefix, "worker", "--once")
    assert code == 0, out


def test_unknown_job_is_refused(redis_url: str) -> None:
    code, out = run("--url", redis_url, "worker", "--job", "nope")
    assert code == 2
    assert "unknown job" in out


def test_bad_url_is_a_clean_error() -> None:
    code, out = run("--url", "http://nowhere", "counters", "list")
    assert code == 1
    assert "scheme" in out


def test_python_dash_m_and_the_env_var(redis_url: str, prefix: str, tmp_path: Path) -> None:
    env = {"WEBTIER_REDIS_URL": redis_url, "WEBTIER_PREFIX": prefix, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "webtier", "workers"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
