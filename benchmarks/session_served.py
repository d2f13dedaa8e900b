"""``webtier bench sessions --frameworks --served``: the same pairs as
:mod:`benchmarks.session_frameworks`, each app behind a real server (gunicorn
for Django and Flask, uvicorn for Starlette), driven by ``wrk`` with the
seeded session's cookie: requests/s, the app server's CPU per request and
Redis's time per request, beside the framework alone (a route that touches
no session, the ceiling any session can reach). Round trips per request are
counted in process, exactly, as in the in-process mode.

An in-process test client spends more CPU per request than the app it
drives, and in the same process: a session's saving hides behind it. Here
the load generator is another program, and the server's own CPU is read
from /proc.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from benchmarks import _session_apps, session_frameworks
from benchmarks._harness import Harness
from benchmarks._results import Goal, Row
from webtier.errors import ConfigError

TITLE = "webtier bench sessions --frameworks --served"

CONNECTIONS = 4  # wrk's connections; the WSGI server's threads
WARMUP_SECONDS = 1.0  # of wrk before the timed runs: connections made, scripts loaded
RATE_GOALS = (Goal(1.5),)
ROOT = Path(__file__).resolve().parents[1]


def run(h: Harness) -> list[Row]:
    wrk = shutil.which("wrk")
    if wrk is None:
        raise ConfigError("--served needs wrk on the PATH (apt-get install wrk)")
    h.notes.append(
        f"requests/s: wrk, {CONNECTIONS} connections, against gunicorn (gthread, 1 worker, "
        f"{CONNECTIONS} threads) for Django and Flask and uvicorn (1 worker) for Starlette; "
        "CPU: the app server's processes (user + system, /proc) per request; Redis: "
        "its server process's CPU (INFO cpu, user + system) per request; raw column: the "
        "same server on a route that touches no session; round trips: counted in process"
    )
    rows: list[Row] = []
    for framework in ("Django", "Flask", "Starlette"):
        rows.extend(_pair(h, wrk, framework))
    h.server.flush()
    return rows


def _pair(h: Harness, wrk: str, framework: str) -> list[Row]:
    trips = session_frameworks.round_trips(h, framework)
    h.server.flush()
    repeat = h.settings.repeat
    rates: dict[str, list[float]] = {"webtier": [], "anchor": []}
    cpus: dict[str, list[float]] = {"webtier": [], "anchor": []}
    redis_cpu: dict[str, list[float]] = {"webtier": [], "anchor": []}
    alone_rate: list[float] = []
    alone_cpu: list[float] = []
    urls = {"webtier": h.server.url, "anchor": h.server.book_url}
    with contextlib.ExitStack() as stack:
        served = {name: stack.enter_context(_served(framework, name, urls[name])) for name in urls}
        cookies = {name: _seeded(framework, server.base) for name, server in served.items()}
        for name, server in served.items():
            _wrk(wrk, f"{server.base}/touch", cookies[name], WARMUP_SECONDS)
        h.ticker.begin(f"{framework} served: webtier vs the anchor", repeat * 3)
        # The sides take turns, so that drift of a shared machine hurts both.
        for round_number in range(repeat):
            for name, server in served.items():
                h.say(f"{framework} served, {name}: run {round_number + 1}/{repeat}")
                h.server.reset_stats()
                before = server.cpu()
                done, seconds = _wrk(wrk, f"{server.base}/touch", cookies[name], h.settings.seconds)
                cpu = server.cpu() - before
                rates[name].append(done / seconds)
                cpus[name].append(cpu / done * 1e6)
                # Its CPU, not commandstats: a script's time there holds the
                # commands it ran, which commandstats lists a second time.
                redis_cpu[name].append(h.server.usage().cpu_seconds / done * 1e6)
                h.ticker.tick()
            # The framework alone: the webtier side's server on a route with no session.
            server = served["webtier"]
            before = server.cpu()
            done, seconds = _wrk(wrk, f"{server.base}/plain", "", h.settings.seconds)
            alone_rate.append(done / seconds)
            alone_cpu.append((server.cpu() - before) / done * 1e6)
            h.ticker.tick()
        for name, server in served.items():
            _check_kept(framework, server.base, cookies[name])

    note = session_frameworks.NOTES[framework] + "; served; the book column is the anchor"
    compare = session_frameworks.comparison
    return [
        compare(h, f"{framework} served", "round trips per request", "round trips/request",
                trips["/touch"], session_frameworks.TRIP_GOALS, note),
        compare(h, f"{framework} served", session_frameworks.UNCHANGED, "round trips/request",
                trips["/read"], (), note),
        compare(h, f"{framework} served", "requests/s", "requests/s", rates, RATE_GOALS,
                note, raw=alone_rate),
        compare(h, f"{framework} served", "app server CPU µs/request", "CPU µs/request", cpus,
                (), note, raw=alone_cpu),
        compare(h, f"{framework} served", "Redis CPU µs/request", "CPU µs/request", redis_cpu,
                (), note),
    ]  # fmt: skip


class _Server:
    def __init__(self, process: subprocess.Popen[bytes], port: int) -> None:
        self.process = process
        self.base = f"http://127.0.0.1:{port}"

    def cpu(self) -> float:
        """CPU seconds (user + system) of the server and its workers so far."""
        ticks = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError):
                # After the command's name in parentheses: state, ppid, ... utime, stime.
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(stat.parent.name) == self.process.pid or int(fields[1]) == self.process.pid:
                    ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _served(framework: str, side: str, url: str) -> Iterator[_Server]:
    port = _free_port()
    env = {
        **os.environ,
        _session_apps.FRAMEWORK_ENV: framework,
        _session_apps.SIDE_ENV: side,
        _session_apps.URL_ENV: url,
    }
    if framework == "Starlette":
        command = [sys.executable, "-m", "uvicorn", "--factory", "benchmarks._session_apps:asgi"]
        command += ["--port", str(port), "--log-level", "warning", "--no-access-log"]
    else:
        command = [sys.executable, "-m", "gunicorn", "benchmarks._session_apps:wsgi()"]
        command += ["--bind", f"127.0.0.1:{port}", "--workers", "1", "--worker-class", "gthread"]
        command += ["--threads", str(CONNECTIONS), "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    try:
        server = _Server(process, port)
        _wait_ready(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_ready(server: _Server) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"the server exited ({server.process.returncode})")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.base}/plain", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the server at {server.base} did not answer in 30 s")


def _seeded(framework: str, base: str) -> str:
    """The Cookie header of a session seeded on the server at ``base``:
    read from Set-Cookie (the Starlette sides' cookies are Secure, which a
    client keeps only for https)."""
    response = httpx.get(f"{base}/seed")
    if response.status_code != 200:
        raise RuntimeError(f"{framework} answered {response.status_code} to /seed")
    pairs = [header.split(";", 1)[0] for header in response.headers.get_list("set-cookie")]
    if not pairs:
        raise RuntimeError(f"{framework} set no session cookie")
    cookie = "; ".join(pairs)
    first = httpx.get(f"{base}/touch", headers={"cookie": cookie}).text
    if first != "1":
        raise RuntimeError(f"{framework} did not keep the seeded session: {first!r}")
    return cookie


def _check_kept(framework: str, base: str, cookie: str) -> None:
    """The counter went up: wrk's requests were served with the session.
    (Concurrent requests of one session that each add one to the same key
    lose some of it on either side: a read-modify-write is not atomic.)"""
    count = int(httpx.get(f"{base}/touch", headers={"cookie": cookie}).text)
    if count < 10:
        raise RuntimeError(f"{framework}: wrk's requests did not use the session ({count})")


_DONE = re.compile(rb"(\d+) requests in ([\d.]+)(us|ms|s|m)")
_ERRORS = re.compile(rb"Non-2xx or 3xx responses: (\d+)|Socket errors: .*")
_UNITS = {b"us": 1e-6, b"ms": 1e-3, b"s": 1.0, b"m": 60.0}


def _wrk(wrk: str, url: str, cookie: str, seconds: float) -> tuple[int, float]:
    """Requests wrk completed in ``seconds`` and the time it took."""
    command = [wrk, "-t1", f"-c{CONNECTIONS}", f"-d{max(1, round(seconds))}s", url]
    if cookie:
        command += ["-H", f"Cookie: {cookie}"]
    done = subprocess.run(command, capture_output=True, check=True, timeout=seconds + 60)
    errors = _ERRORS.search(done.stdout)
    if errors is not None:
        raise RuntimeError(f"wrk saw failed requests: {errors[0].decode()}")
    found = _DONE.search(done.stdout)
    if found is None:
        raise RuntimeError(f"wrk's output had no count: {done.stdout.decode()[:500]}")
    return int(found[1]), float(found[2]) * _UNITS[found[3]]
