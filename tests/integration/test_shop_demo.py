"""``webtier demo``: the README's first command, as a new user runs it.

From a fresh data directory (the embedded redis-server, a SQLite inventory
of 100,000 items made on the first run), it prints the shop's URL, serves
the shop with traffic of its own, stops warm on Ctrl-C (exit 0), and
``webtier ranking top``, ``stats slowest`` and ``sessions stats`` then show
what the traffic did. A second run reuses the items.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from tests.helpers.cli import fresh_machine, read_until
from tests.helpers.servers import wait_for
from webtier.cli import main

URL = re.compile(r"open at (http://\S+)")


def webtier(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webtier", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_taken_port_is_one_error_line(redis_url: str, prefix: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        database = f"sqlite:///{tmp_path}/shop.db"
        done = CliRunner().invoke(
            main,
            ["--url", redis_url, "--prefix", prefix, "--database", database,
             "demo", "--port", str(port), "--no-traffic", "--items", "20"],
        )  # fmt: skip
    assert done.exit_code == 1, done.output
    assert done.output.strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 is taken: give another --port, or --port 0 for a free one"
    ]


@pytest.mark.slow
def test_the_readme_command_shows_the_shop_with_traffic(tmp_path: Path) -> None:
    env = fresh_machine(tmp_path)
    started = time.monotonic()
    demo = subprocess.Popen(
        [sys.executable, "-m", "webtier", "demo", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    shown: list[str] = []
    try:
        found = read_until(demo, URL, shown)
        opened = time.monotonic() - started
        url = found.group(1)
        assert httpx.get(url, timeout=10).status_code == 200
        time.sleep(8)  # the traffic's first seconds
        print(f"first run: the shop was open {opened:.1f} s after the command")
        demo.send_signal(signal.SIGINT)
        rest, _ = demo.communicate(timeout=60)
        shown.append(rest)
        assert demo.returncode == 0, "".join(shown)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    output = "".join(shown)
    assert "100,000 items in sqlite" in output
    # Its figures are printed; a 503 or two on an overloaded machine (a
    # request whose Redis call outlived its time limit) is not a failure here.
    assert re.search(r"traffic: [\d,]+ requests \(", output), output

    top = webtier(env, "ranking", "top")
    assert top.returncode == 0, top
    assert re.search(r"^\s+0\s+\S+\s+\d+", top.stdout, re.M), top.stdout
    slowest = webtier(env, "stats", "slowest")
    assert slowest.returncode == 0, slowest
    assert "/item/{item_id}" in slowest.stdout, slowest.stdout
    sessions = webtier(env, "sessions", "stats")
    assert sessions.returncode == 0, sessions
    live = re.search(r"^sessions\s+(\d+)", sessions.stdout, re.M)
    assert live, sessions.stdout
    assert int(live.group(1)) > 0, sessions.stdout

    again = webtier(env, "demo", "--port", "0", "--no-traffic", "--duration", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "items in" not in again.stdout  # made once, reused
    assert "is open at" in again.stdout


def spawned_children(pid: int) -> list[int]:
    """The worker processes ``pid`` spawned (multiprocessing's spawn_main)."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
        if parent == pid and b"spawn_main" in command:
            children.append(int(entry.name))
    return children


def two_worker_demo(redis_url: str, prefix: str, tmp_path: Path) -> subprocess.Popen[str]:
    """``webtier demo --workers 2`` on a fresh machine, in a process group of
    its own (a Ctrl-C reaches the whole group, as in a terminal)."""
    return subprocess.Popen(
        [sys.executable, "-m", "webtier", "--url", redis_url, "--prefix", prefix,
         "--database", f"sqlite:///{tmp_path}/shop.db",
         "demo", "--port", "0", "--items", "50", "--no-traffic", "--workers", "2"],
        env=fresh_machine(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )  # fmt: skip


@pytest.mark.slow
def test_the_demo_on_worker_processes(redis_url: str, prefix: str, tmp_path: Path) -> None:
    demo = two_worker_demo(redis_url, prefix, tmp_path)
    shown: list[str] = []
    try:
        found = read_until(demo, URL, shown)
        workers = spawned_children(demo.pid)
        assert len(workers) == 2, "".join(shown)
        with httpx.Client(base_url=found.group(1), timeout=10) as http:
            for item in range(1, 21):
                assert http.get(f"/item/{item}").status_code == 200
        os.killpg(demo.pid, signal.SIGINT)
        demo.wait(timeout=60)
        # Read through the same file, not communicate(): the lines after the
        # URL may be in its buffer already, which communicate() would skip.
        shown.append(demo.stdout.read())
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
        if demo.stdout is not None:
            demo.stdout.close()
    output = "".join(shown)
    assert demo.returncode == 0, output
    assert "served by 2 worker processes" in output
    assert "Traceback" not in output
    for pid in workers:  # stopped with the demo, none left behind
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


@pytest.mark.slow
def test_ctrl_c_while_the_workers_start_stops_them_without_a_traceback(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    # The terminal's Ctrl-C reaches every process of the group, workers still
    # importing too: they end quietly (by the demo's SIGTERM), however far
    # each had got.
    demo = two_worker_demo(redis_url, prefix, tmp_path)
    try:
        wait_for(lambda: len(spawned_children(demo.pid)) == 2, "the workers spawned")
        os.killpg(demo.pid, signal.SIGINT)
        output, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
    assert "Traceback" not in output, output
