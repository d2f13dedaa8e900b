"""Progress bars on long work: drawn on a terminal's stderr, with rate and
time left; nothing on a pipe."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

import webtier
from tests.helpers.cli import webtier_cli

pytestmark = pytest.mark.onlynoncluster  # what the terminal shows, not routing

ITEMS = 3000


def webtier_on_a_terminal(*args: str) -> tuple[int, str, str]:
    """Run ``webtier args`` with stderr on a pseudo-terminal, stdout on a
    pipe: exit status, stdout, what the terminal received."""
    terminal, stderr = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "160"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "webtier", *args], stdout=subprocess.PIPE, stderr=stderr, env=env
    )
    os.close(stderr)
    received = bytearray()
    while True:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # EIO: the process closed its end
            break
        if not chunk:
            break
        received += chunk
    os.close(terminal)
    assert process.stdout is not None
    with process.stdout:
        stdout = process.stdout.read().decode()
    return process.wait(timeout=60), stdout, received.decode(errors="replace")


@pytest.fixture
def scheduled(redis_url: str, prefix: str, tmp_path: Path) -> tuple[str, ...]:
    edge = ("--url", redis_url, "--prefix", prefix, "--database", f"sqlite:///{tmp_path}/s.db")
    assert webtier_cli(*edge, "rows", "init", "--items", str(ITEMS)).code == 0
    return edge


def test_rows_schedule_and_refresh_show_progress_on_a_terminal(scheduled: tuple[str, ...]) -> None:
    code, stdout, terminal = webtier_on_a_terminal(
        *scheduled, "rows", "schedule", "--all", "--delay", "60"
    )
    assert (code, stdout) == (0, f"{ITEMS} items scheduled\n")
    assert "scheduling" in terminal
    assert "rows/s" in terminal
    assert "ETA" in terminal
    assert f"/{ITEMS}" in terminal  # done of the total

    code, stdout, terminal = webtier_on_a_terminal(*scheduled, "rows", "refresh")
    assert code == 0, terminal
    assert stdout.startswith(f"{ITEMS} due: {ITEMS} stored")
    assert "refreshing" in terminal
    assert "rows/s" in terminal


def test_no_progress_on_a_pipe(scheduled: tuple[str, ...]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "webtier", *scheduled, "rows", "schedule", "--all", "--delay", "9"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{ITEMS} items scheduled\n", "")


def test_sessions_and_counters_clean_show_progress(redis_url: str, prefix: str) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, webtier.Config(prefix=prefix))
    for _ in range(300):
        tier.sessions.new()
    tier.counters.record("hits", 1)
    webtier.disconnect(client)
    edge = ("--url", redis_url, "--prefix", prefix)
    cleaning = ("sessions", "clean", "--keep", "10", "--yes")
    code, stdout, terminal = webtier_on_a_terminal(*edge, *cleaning)
    assert code == 0, terminal
    assert stdout.startswith("290 removed")
    assert "removing sessions" in terminal
    assert "sessions/s" in terminal
    code, stdout, terminal = webtier_on_a_terminal(*edge, "counters", "clean")
    assert code == 0, terminal
    assert stdout.startswith("1 counters")
    assert "cleaning counters" in terminal
