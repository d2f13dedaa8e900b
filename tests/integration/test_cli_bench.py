"""``webtier bench`` as an operator runs it: on the server of ``--url`` /
``WEBTIER_REDIS_URL``, and stopped by Ctrl-C with what it measured so far."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import webtier
from tests.helpers.servers import wait_for
from webtier.testing import RedisServer

pytestmark = pytest.mark.timeout(180)

BENCH = [sys.executable, "-m", "webtier", "bench", "counters"]


def group_gone(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


def test_ctrl_c_stops_every_process_and_prints_the_results_so_far() -> None:
    # Its own session, so that SIGINT reaches its process group as Ctrl-C
    # in a terminal does: the bench, its worker processes, its redis-server.
    bench = subprocess.Popen(
        [*BENCH, "--seconds", "0.5", "--repeat", "2", "--processes", "1,2", "--scale", "0.01"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert bench.stderr is not None
    seen = []
    try:
        for line in bench.stderr:  # until it measures with two worker processes
            seen.append(line)
            if "2 process(es)" in line:
                break
        else:
            pytest.fail("".join(seen))
        os.killpg(bench.pid, signal.SIGINT)
        stdout, stderr = bench.communicate(timeout=60)
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.wait()
    output = "".join(seen) + stderr + stdout
    assert bench.returncode == 128 + signal.SIGINT, output
    assert "Traceback" not in output
    assert "interrupted (Ctrl-C)" in stdout
    assert "webtier counters.record" in stdout  # measured with one process, before Ctrl-C
    wait_for(lambda: group_gone(bench.pid), "every process of the bench gone", timeout=10)


def test_bench_measures_the_server_of_webtier_redis_url() -> None:
    """``WEBTIER_REDIS_URL`` or ``webtier --url`` names the server to
    measure: the bench refuses its non-empty databases (it would flush
    them), which shows that it went there."""
    with RedisServer.start() as server:
        client = webtier.connect(server.url)
        client.set("precious", "1")
        env = {"WEBTIER_REDIS_URL": server.url, "PATH": "/usr/bin:/bin"}
        given = [sys.executable, "-m", "webtier", "--url", server.url, "bench", "counters"]
        for command, environment in ((BENCH, env), (given, None)):
            done = subprocess.run(
                command, env=environment, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 1, done.stderr
            assert "the bench needs databases 0 and 1 empty" in done.stderr
        assert client.get("precious") == b"1"
        webtier.disconnect(client)


@pytest.mark.slow
def test_client_processes_find_the_benchmarks_from_any_directory(tmp_path: Path) -> None:
    # The client processes are spawned: they import the benchmarks from the
    # parent's sys.path, not from the directory the bench was started in.
    ran = subprocess.run(
        [*BENCH, "--seconds", "0.2", "--repeat", "1", "--processes", "2", "--scale", "0.01"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "Traceback" not in ran.stderr
    assert "webtier counters.record" in ran.stdout
