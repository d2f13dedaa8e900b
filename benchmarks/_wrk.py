"""wrk as the benches' load generator: C and LuaJIT, so the load costs a
small part of what the stacks it drives spend (the Python driver,
:func:`webtier.demo.loadgen.drive`, spent more CPU a request than they).

wrk does no modelling. :func:`write_visits` plays webtier loadgen's model
(:mod:`webtier.demo.loadgen.model`) in Python with a fixed seed, into a
file of requests per wrk thread: item views drawn from the Zipf law, carts,
logins, checkouts, logouts, returning visitors with the cookies of their
last visit. ``_shop_wrk.lua`` replays the file, keeping the cookies each
response sets, the CSRF token of the last page (the shop's forms need
it) and the ``Location`` of a 303 to follow. Each thread has one
connection, so a response always answers its thread's last request.
"""

from __future__ import annotations

import json
import random
import re
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from webtier.demo.loadgen.model import Returning, Step, Traffic, Visitor, Zipf
from webtier.demo.loadgen.report import STATUS_CLASSES, LoadReport, RouteFigures, route_of

SCRIPT = Path(__file__).with_name("_shop_wrk.lua")
MARK = "WEBTIER-WRK "
LONGEST = 600  # seconds a run of a fixed amount of work may take
# Socket errors of a run, as a route of their own in its report.
SOCKET_ERRORS = "(wrk: socket errors)"


def wrk_path() -> str | None:
    """The ``wrk`` binary on PATH (Debian's package), if installed."""
    return shutil.which("wrk")


def _get(path: str) -> str:
    return f"G\t{path}\t{route_of('GET', path)}"


def _post(path: str, form: dict[str, str | int], from_page: str) -> list[str]:
    """A form's POST, then the GET of its 303's target."""
    return [f"P\t{path}\t{urlencode(form)}\t{from_page}", "F"]


def step_lines(step: Step) -> list[str]:
    """The requests a browser makes for one step of a visit, as the Python
    driver (:mod:`webtier.demo.loadgen.driver`) makes them."""
    action = step.action
    pages = {"home": "/", "cart": "/cart", "flash": "/flash-sale", "account": "/account"}
    if action in pages:
        return [_get(pages[action])]
    if action == "item":
        return [_get(f"/item/{step.item}")]
    if action == "add":
        return _post("/cart", {"item": step.item or 1, "count": step.count or 1},
                     f"/item/{step.item}")  # fmt: skip
    if action == "login":
        return [_get("/login"), *_post("/login", {"username": step.user or ""}, "/login")]
    if action == "checkout":
        return [_get("/cart"), *_post("/checkout", {}, "/cart")]
    return _post("/logout", {}, "/account")  # logout


def visit_lines(traffic: Traffic, zipf: Zipf, seed: int, visits: int) -> list[str]:
    """``visits`` visits of the model, seeded, as the replay's lines."""
    rng = random.Random(seed)
    returning = Returning()
    lines: list[str] = []
    for number in range(visits):
        visitor = returning.arrive(traffic, rng)
        if visitor.cookies:
            lines.append(f"R\t{visitor.cookies['visitor']}")
        else:
            # The replay keeps the real cookies: this one only names its jar.
            visitor = Visitor({"visitor": str(number)})
            lines.append("N")
        plan = traffic.plan(random.Random(rng.getrandbits(64)), zipf, logged_in=visitor.logged_in)
        for step in plan:
            lines += step_lines(step)
            if step.action in ("login", "logout"):
                visitor.logged_in = step.action == "login"
        lines.append(f"K\t{visitor.cookies['visitor']}")
        returning.leave(visitor, traffic, rng)
    return lines


def write_visits(
    prefix: Path, threads: int, traffic: Traffic, seed: int, visits_per_thread: int
) -> None:
    """One file of visits per wrk thread, ``<prefix>.1`` to ``<prefix>.<threads>``."""
    zipf = Zipf(traffic.items, traffic.zipf_s)
    for thread in range(1, threads + 1):
        lines = visit_lines(traffic, zipf, seed * 1_000 + thread, visits_per_thread)
        Path(f"{prefix}.{thread}").write_text("\n".join(lines) + "\n")


@dataclass(frozen=True, slots=True)
class WrkRun:
    """What one wrk run measured: the report as the Python driver's, wrk's
    own latency percentiles over every request, and wrk's CPU."""

    report: LoadReport
    p50: float  # seconds
    p99: float
    cpu_seconds: float


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_wrk(
    base: str,
    seconds: float,
    connections: int,
    *,
    threads: int | None = None,
    script: Path | None = SCRIPT,
    args: tuple[str, ...] = (),
    stopped: Callable[[], bool] | None = None,
) -> tuple[dict[str, Any], float, str]:
    """Run wrk against ``base`` for ``seconds`` with ``connections`` (and as
    many threads, unless ``threads``); the script's figures (its line
    marked :data:`MARK`), wrk's CPU seconds and its output. With
    ``stopped``: until it says the script's threads stopped, then wrk is
    interrupted (it prints its figures on SIGINT)."""
    binary = wrk_path()
    if binary is None:
        raise RuntimeError("wrk is not installed (Debian: apt-get install wrk)")
    duration = f"{max(1, round(seconds)) if stopped is None else LONGEST}s"
    command = [binary, f"-t{threads or connections}", f"-c{connections}", f"-d{duration}"]
    command += ["--latency", *(["-s", str(script)] if script else []), base]
    command += ["--", *args] if args else []
    before = _children_cpu()
    pipe = subprocess.PIPE
    with subprocess.Popen(command, stdout=pipe, stderr=pipe, text=True) as wrk:
        if stopped is not None:
            deadline = time.monotonic() + LONGEST
            while wrk.poll() is None and not stopped() and time.monotonic() < deadline:
                time.sleep(0.02)
            wrk.send_signal(signal.SIGINT)
        out, err = wrk.communicate(timeout=seconds + 120)
    cpu = _children_cpu() - before
    if wrk.returncode != 0:
        raise RuntimeError(f"wrk failed ({wrk.returncode}): {err.strip()}")
    found = [line for line in out.splitlines() if line.startswith(MARK)]
    figures: dict[str, Any] = json.loads(found[-1].removeprefix(MARK)) if found else {}
    return figures, cpu, out


def requests_per_second(url: str, seconds: float, connections: int, threads: int) -> float:
    """wrk's requests/s of a plain ``GET url``, no script."""
    _, _, output = run_wrk(url, seconds, connections, threads=threads, script=None)
    found = re.search(r"^Requests/sec:\s+([0-9.]+)", output, re.M)
    if found is None:
        raise RuntimeError(f"wrk printed no requests/s: {output}")
    return float(found.group(1))


def replay(base: str, prefix: Path, seconds: float, connections: int, limit: int = 0) -> WrkRun:
    """wrk replaying the visits of :func:`write_visits` at ``prefix`` (one
    thread and connection per file) against the shop at ``base``; with
    ``limit``, each connection stops after that many responses (a fixed
    amount of work, however fast the shop)."""
    args = (str(prefix), str(limit))

    def stopped() -> bool:
        return all(Path(f"{prefix}.stopped.{n}").exists() for n in range(1, connections + 1))

    for left in Path(prefix).parent.glob(f"{Path(prefix).name}.stopped.*"):
        left.unlink()  # an earlier run's
    figures, cpu, output = run_wrk(
        base + "/", seconds, connections, args=args, stopped=stopped if limit else None
    )
    if not figures:
        raise RuntimeError(f"wrk printed no figures: {output}")
    routes = []
    for route, per in sorted(dict(figures["routes"]).items()):
        statuses = {kind: int(per.get(kind, 0)) for kind in STATUS_CLASSES}
        routes.append(RouteFigures(route, statuses, {}, 0, None, None, None, None))
    socket_errors = int(figures["errors"]) + int(figures["timeouts"])
    if socket_errors:
        zero = dict.fromkeys(STATUS_CLASSES, 0)
        routes.append(RouteFigures(SOCKET_ERRORS, zero, {}, socket_errors, None, None, None, None))
    report = LoadReport(
        seconds=int(figures["duration_us"]) / 1e6,
        routes=tuple(routes),
        visitors=int(figures["visitors"]),
        returning_visitors=int(figures["returning"]),
        waited_for_a_slot=0,
        checkouts=int(figures["checkouts"]),
        out_of_stock=0,
        order_ids=(),
    )
    p50, p99 = (int(figures[k]) / 1e6 for k in ("p50_us", "p99_us"))
    return WrkRun(report, p50, p99, cpu)
