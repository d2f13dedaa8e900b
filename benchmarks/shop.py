"""The end-to-end benchmark: the demo shop under the load generator's
traffic, three ways, in one run.

1. webtier: :func:`webtier.demo.shop.create_app` (its middleware and API);
2. the book: the same pages on the book's listings (:mod:`benchmarks._shop_stacks`);
3. SQL alone: the same pages, no Redis.

Each stack is a uvicorn server of one worker (uvloop, httptools) in a process of its own, its
background jobs in another (webtier's worker; the book's ``cache_rows``,
session cleaner and rescale daemons); each reads its own copy of one
SQLite inventory of 100,000 items (times ``--scale``). The stacks take turns, ``--repeat``
rounds of ``--seconds`` each, after a warm-up turn each: the stacks not
measured are paused (SIGSTOP), so the Redis server's and the machine's
CPU go to the one measured. The load is as many visitors at once as
``--processes``' largest count times 8, each starting a new visit as the
last one ends (a closed loop: the figure is the most the stack serves),
sent by ``wrk`` replaying the loadgen model's visits (:mod:`benchmarks._wrk`;
the default when wrk is installed) or by :func:`webtier.demo.loadgen.drive`
from this process (``--load python``, whose CPU a request is more than the
stacks': it bounds what they show). With wrk, a fourth stack is webtier's
shop behind two uvicorn workers. Figures are medians over the rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from benchmarks._harness import Harness
from benchmarks._render import number
from benchmarks._results import Goal, Measurement, Row
from benchmarks._shop_server import FIGURES, RESET, jobs, serve, serve_fixed
from benchmarks._wrk import replay, requests_per_second, write_visits, wrk_path
from webtier.demo import shopdb
from webtier.demo.loadgen import LoadReport, Traffic, drive
from webtier.demo.loadgen.browser import form_token
from webtier.demo.shop.settings import SESSION_COOKIE
from webtier.errors import ConfigError
from webtier.testing import free_port

TITLE = "webtier bench shop"
ITEMS = 100_000
STACKS = ("webtier", "book", "sql")
TWO_WORKERS = "webtier2"  # webtier's shop behind two uvicorn workers (with wrk only)
NAMES = {"webtier": "webtier", "book": "book's listings", "sql": "SQL only",
         TWO_WORKERS: "webtier, two workers"}  # fmt: skip
LOADS = ("wrk", "python")
VISITORS_PER_PROCESS = 8
# Visits in each wrk connection's file: more than a run replays at the
# speeds seen (the file starts over, with new visitors, if not).
WRK_VISITS = 1_000
USERS = 1_000
ITEM_ROUTE = "GET /item/{item_id}"
IDLE_HITS = 200
PAGE_CONNECTIONS = 16  # wrk's, on the cached page and the bare app's
# The routes with a row of their own (every route is in the JSON's reports).
ROUTES = ("GET /", ITEM_ROUTE, "GET /cart", "POST /cart", "POST /login", "POST /checkout")


@dataclass
class Stack:
    name: str
    base: str
    processes: list[multiprocessing.process.BaseProcess]
    reports: list[LoadReport] = field(default_factory=list)
    latencies: list[tuple[float, float]] = field(default_factory=list)  # wrk's p50, p99
    figures: list[dict[str, Any]] = field(default_factory=list)
    redis_cpu: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)  # the load generator's

    def clear(self) -> None:
        """Forget the warm-up's figures."""
        for kept in (self.reports, self.latencies, self.figures, self.redis_cpu, self.client_cpu):
            kept.clear()

    def signal(self, signum: int) -> None:
        """Signal the stack's processes and theirs (uvicorn's workers): each
        leads a process group (:func:`benchmarks._shop_server.own_group`)."""
        for process in self.processes:
            if process.pid is not None and process.is_alive():
                try:
                    os.killpg(process.pid, signum)
                except ProcessLookupError:  # not a group's leader yet: starting
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signum)


def _wait_for_port(port: int, process: multiprocessing.process.BaseProcess) -> None:
    deadline = time.monotonic() + 120
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        if time.monotonic() > deadline or not process.is_alive():
            raise RuntimeError("a shop bench server did not start")
        time.sleep(0.05)


@contextlib.contextmanager
def running(name: str, redis_url: str, database: str, items: int) -> Iterator[Stack]:
    """One stack's server and jobs processes, paused, until the block ends."""
    spawn = multiprocessing.get_context("spawn")
    port = free_port()
    # The two-worker shop has keys of its own, and its own jobs over them.
    kind, workers, prefix = ("webtier", 2, "shop2") if name == TWO_WORKERS else (name, 1, "shop")
    server = spawn.Process(
        target=serve,
        args=(kind, redis_url, database, items, port),
        kwargs={"workers": workers, "prefix": prefix},
        daemon=workers == 1,  # a daemonic process may not start uvicorn's workers
    )
    helper = spawn.Process(target=jobs, args=(kind, redis_url, database, items, prefix),
                           daemon=True)  # fmt: skip
    stack = Stack(name, f"http://127.0.0.1:{port}", [server, helper])
    try:
        for process in stack.processes:
            process.start()
        _wait_for_port(port, server)
        stack.signal(signal.SIGSTOP)
        yield stack
    finally:
        stack.signal(signal.SIGCONT)
        for process in stack.processes:
            process.terminate()
        for process in stack.processes:
            process.join(10)
            if process.is_alive():
                process.kill()


def _figures(base: str, path: str) -> dict[str, Any]:
    figures: dict[str, Any] = httpx.get(base + path, timeout=30).json()
    return figures


def _hits(base: str, logged_in: bool = False) -> None:
    """Sequential requests for the most popular item's page (cached after
    the load: it is the most viewed), anonymous or ``logged_in`` (then the
    page's holes are filled from the visitor's session)."""
    with httpx.Client(base_url=base, timeout=30) as http:
        if logged_in:
            form = http.get("/login").text
            token = form_token(form, "/login")
            http.post("/login", data={"username": "bench", "csrftoken": token or ""})
            if not any(name == SESSION_COOKIE for name in http.cookies):
                raise RuntimeError("the bench could not log in to the shop")
        for _ in range(IDLE_HITS):
            http.get("/item/1")


@dataclass(frozen=True, slots=True)
class Load:
    """How the stacks are loaded: ``wrk`` replaying the model's visits
    (:mod:`benchmarks._wrk`), or ``python``, webtier loadgen's own driver."""

    kind: str
    visitors: int  # at once: wrk's connections, the driver's concurrency
    folder: Path
    items: int
    requests: int = 0  # wrk: responses per connection before it stops (0: none)

    def visits(self, seed: int) -> Path:
        """Where the visits of ``seed`` are, for wrk."""
        return self.folder / f"visits-{seed}"

    def prepare(self, seed: int) -> None:
        if self.kind == "wrk":
            traffic = Traffic(items=self.items, users=USERS)
            write_visits(self.visits(seed), self.visitors, traffic, seed, WRK_VISITS)


def _load(h: Harness, stack: Stack, load: Load, seconds: float, seed: int) -> LoadReport:
    """One run of ``load`` on ``stack``; its client CPU in ``stack``'s figures."""
    if load.kind == "wrk":
        measured = replay(stack.base, load.visits(seed), seconds, load.visitors, load.requests)
        stack.latencies.append((measured.p50, measured.p99))
        stack.client_cpu.append(measured.cpu_seconds)
        return measured.report
    client_cpu = time.process_time()
    report = asyncio.run(
        drive(
            stack.base,
            rate=1e6,  # arrivals wait for a free slot: a closed loop of `visitors`
            duration=seconds,
            users=USERS,
            items=load.items,
            seed=seed,
            concurrency=load.visitors,
        )
    )
    stack.client_cpu.append(time.process_time() - client_cpu)
    return report


def _turn(h: Harness, stack: Stack, load: Load, seconds: float, seed: int) -> None:
    """One measured turn of ``stack``: resumed, loaded, read, paused. The
    two-worker stack's figures are its requests/s alone (each worker
    counts its own)."""
    stack.signal(signal.SIGCONT)
    try:
        if stack.name == TWO_WORKERS:
            stack.reports.append(_load(h, stack, load, seconds, seed))
            return
        _figures(stack.base, RESET)
        h.server.reset_stats()
        report = _load(h, stack, load, seconds, seed)
        figures = _figures(stack.base, FIGURES)
        stack.redis_cpu.append(h.server.usage().cpu_seconds)
        stack.reports.append(report)
        # The load over, a cached page's own time, without the queue of a
        # busy event loop in front of it: sequential hits, timed in the app.
        for kind in ("hit", "filled_hit") if stack.name == "webtier" else ("hit",):
            _figures(stack.base, RESET)
            _hits(stack.base, logged_in=kind == "filled_hit")
            idle = _figures(stack.base, FIGURES)
            figures[f"idle_{kind}_p99_seconds"] = idle[f"{kind}_p99_seconds"]
            # Every hit cached: the round trips of one cached page (its own).
            whole = idle[f"{kind}s"] == IDLE_HITS
            trips = idle[f"{kind}_round_trips"] / IDLE_HITS if whole else None
            figures[f"idle_{kind}_round_trips"] = trips
        stack.figures.append(figures)
    finally:
        stack.signal(signal.SIGSTOP)


def run(h: Harness, load: str | None = None, requests: int = 0) -> list[Row]:
    """The bench; ``load``: ``wrk`` (the default when installed) or
    ``python``; ``requests``: with wrk, the responses each connection
    waits for before it stops (a fixed amount of work; 0: ``--seconds``)."""
    kind = load or ("wrk" if wrk_path() else "python")
    if kind == "wrk" and wrk_path() is None:
        raise ConfigError("--load wrk: wrk is not installed (Debian: apt-get install wrk)")
    items = h.settings.size(ITEMS)
    names = (*STACKS, TWO_WORKERS) if kind == "wrk" else STACKS
    h.server.flush()
    with tempfile.TemporaryDirectory(prefix="webtier-bench-shop-") as folder:
        visitors = VISITORS_PER_PROCESS * max(h.settings.processes)
        plan = Load(kind, visitors, Path(folder), items, requests)
        database = f"sqlite:///{folder}/shop.db"
        h.say(f"making the shop's database: {items:,} items")
        engine = sa.create_engine(database)
        shopdb.create(engine, items)
        engine.dispose()
        for seed in range(h.settings.repeat + 1):
            plan.prepare(seed)
        urls = {"webtier": h.server.url, "book": h.server.book_url, "sql": h.server.url,
                TWO_WORKERS: h.server.url}  # fmt: skip
        with contextlib.ExitStack() as started:
            # A copy of the database per stack: SQLite locks the whole file, and a
            # stack paused (SIGSTOP) inside a transaction would lock the others out.
            copies = {}
            for name in names:
                shutil.copyfile(f"{folder}/shop.db", f"{folder}/{name}.db")
                copies[name] = f"sqlite:///{folder}/{name}.db"
            stacks = [started.enter_context(running(n, urls[n], copies[n], items)) for n in names]
            h.ticker.begin("shop: " + ", ".join(NAMES[s.name] for s in stacks), h.settings.repeat)
            for stack in stacks:
                h.say(f"{NAMES[stack.name]}: warming up ({kind})")
                _turn(h, stack, plan, h.settings.seconds, 0)
                stack.clear()
            for round_number in range(h.settings.repeat):
                for stack in stacks:
                    h.say(f"{NAMES[stack.name]}, run {round_number + 1}/{h.settings.repeat}")
                    _turn(h, stack, plan, h.settings.seconds, round_number + 1)
                h.ticker.tick()
            cached = _cached_page(h, stacks[0], plan) if kind == "wrk" else None
    by_name = {stack.name: stack for stack in stacks}
    two = by_name.pop(TWO_WORKERS, None)
    rows = _rows(h, by_name, plan, two)
    if cached is not None:
        rows.append(cached)
    return rows


def _cached_page(h: Harness, ours: Stack, load: Load) -> Row:
    """wrk's requests/s of the shop's cached ``/item/1`` against a bare
    Starlette app's page of the same size, under the same uvicorn, taking
    turns ``--repeat`` times."""
    spawn = multiprocessing.get_context("spawn")
    ours.signal(signal.SIGCONT)
    try:
        page = httpx.get(ours.base + "/item/1", timeout=30)  # cached: the load viewed it most
        size = len(page.content)
        port = free_port()
        bare = spawn.Process(target=serve_fixed, args=(size, port), daemon=True)
        bare.start()
        try:
            _wait_for_port(port, bare)
            urls = {"webtier": ours.base + "/item/1", "bare": f"http://127.0.0.1:{port}/item/1"}
            served: dict[str, list[float]] = {"webtier": [], "bare": []}
            for round_number in range(h.settings.repeat + 1):  # the first warms up
                h.say(f"cached /item/1 vs a bare page, run {round_number}/{h.settings.repeat}")
                for name, url in urls.items():
                    rate = requests_per_second(url, h.settings.seconds, PAGE_CONNECTIONS, 2)
                    if round_number:
                        served[name].append(rate)
        finally:
            bare.terminate()
            bare.join(10)
    finally:
        ours.signal(signal.SIGSTOP)
    measured = {
        name: Measurement(what, PAGE_CONNECTIONS, "req/s", tuple(served[name]))
        for name, what in (("webtier", "webtier: cached /item/1 (wrk)"),
                           ("bare", f"bare Starlette page of {size:,} bytes (wrk)"))
    }  # fmt: skip
    h.measurements += measured.values()
    return Row(
        "cached item page, wrk requests/s: the shop's /item/1 vs a bare Starlette page",
        "req/s", PAGE_CONNECTIONS, measured["webtier"], measured["bare"], goals=(Goal(0.5),),
        note=f"{PAGE_CONNECTIONS} connections, one uvicorn worker (uvloop, httptools) each; "
        f"the same {size:,} bytes; X-Cache {page.headers.get('x-cache', 'absent')}",
    )  # fmt: skip


# -- figures ----------------------------------------------------------------------------------


def _per_request(stack: Stack, key: str, scale: float = 1.0) -> tuple[float, ...]:
    return tuple(
        figures[key] * scale / report.requests
        for figures, report in zip(stack.figures, stack.reports, strict=True)
        if report.requests
    )


def _measure(
    h: Harness, stack: Stack, what: str, unit: str, values: tuple[float, ...]
) -> Measurement | None:
    """The figure of ``values``; None when no run measured it (a run so short,
    or a machine so busy, that the stack answered no request in it)."""
    if not values:
        return None
    clients = VISITORS_PER_PROCESS * max(h.settings.processes)
    measurement = Measurement(f"{NAMES[stack.name]}: {what}", clients, unit, values)
    h.measurements.append(measurement)
    return measurement


def _latency(stack: Stack, route: str | None = None) -> str:
    def median_ms(percentile: str) -> str:
        found = []
        for report in stack.reports:
            figures = [r for r in report.routes if route is None or r.route == route]
            values = [getattr(r, percentile) for r in figures if getattr(r, percentile)]
            if values:
                found.append(max(values) if route is None else values[0])
        return f"{statistics.median(found) * 1000:.1f}" if found else "n/a"

    return f"p50 {median_ms('p50')} ms, p99 {median_ms('p99')} ms"


def _wrk_latency(stack: Stack) -> str:
    """wrk's p50 and p99 over every request of the stack (medians of runs)."""
    if not stack.latencies:
        return "n/a"
    p50, p99 = (statistics.median(run[i] for run in stack.latencies) * 1000 for i in (0, 1))
    return f"p50 {p50:.1f} ms, p99 {p99:.1f} ms"


def _rows(h: Harness, stacks: dict[str, Stack], load: Load, two: Stack | None) -> list[Row]:
    ours = stacks["webtier"]

    def rate(stack: Stack, route: str | None = None) -> Measurement | None:
        values = tuple(_requests(r, route) / r.seconds for r in stack.reports)
        return _measure(h, stack, f"{route or 'all requests'}", "req/s", values)

    clients = VISITORS_PER_PROCESS * max(h.settings.processes)
    if load.kind == "wrk":  # wrk's latencies are of every request, not per route
        latency = "all requests: " + "; ".join(
            f"{NAMES[s.name]} {_wrk_latency(s)}" for s in stacks.values()
        )
    else:
        latency = "item pages: " + "; ".join(
            f"{NAMES[s.name]} {_latency(s, ITEM_ROUTE)}" for s in stacks.values()
        )
    overall = {name: rate(stack) for name, stack in stacks.items()}
    # What one worker can serve at most: it is one event loop, so one CPU
    # second per second, divided by its CPU per request.
    capacity = {
        name: _measure(h, stack, "capacity (1 / app CPU per request)", "req/s",
                       tuple(1 / x for x in _per_request(stack, "cpu_seconds") if x))
        for name, stack in stacks.items()
    }  # fmt: skip
    client = tuple(cpu * 1e6 / report.requests
                   for cpu, report in zip(ours.client_cpu, ours.reports, strict=True)
                   if report.requests)  # fmt: skip
    bound = f"load: {load.kind}"
    if client:
        bound += f", which spent {statistics.median(client):,.0f} µs of CPU a request"
    rows = [
        Row("shop mix, requests/s: webtier vs the book", "req/s", clients, overall["webtier"],
            overall["book"], goals=(Goal(1.5),), note=latency),
        Row("shop mix, requests/s: webtier vs SQL only", "req/s", clients, overall["webtier"],
            overall["sql"], goals=(Goal(2),), note=bound),
        Row("shop mix, one worker's capacity: webtier vs the book", "req/s", clients,
            capacity["webtier"], capacity["book"], goals=(Goal(1.5),),
            note="1 / the app process's CPU per request: the most its one event loop serves"),
        Row("shop mix, one worker's capacity: webtier vs SQL only", "req/s", clients,
            capacity["webtier"], capacity["sql"], goals=(Goal(2),)),
    ]  # fmt: skip
    if two is not None:
        rows.append(
            Row("shop mix, requests/s: webtier, two uvicorn workers vs one", "req/s", clients,
                rate(two), overall["webtier"], goals=(Goal(1.7),),
                note=f"{_wrk_latency(two)}; the two workers' shop has keys of its own")
        )  # fmt: skip
    for route in ROUTES:
        per_route = {name: rate(stack, route) for name, stack in stacks.items()}
        note = "; ".join(f"{NAMES[s.name]} {_latency(s, route)}" for s in stacks.values())
        rows.append(
            Row(f"{route}, requests/s: webtier vs the book (SQL only in the note)", "req/s",
                clients, per_route["webtier"], per_route["book"],
                note=f"SQL only {number(sql.value if (sql := per_route['sql']) else None)} "
                f"req/s; {note}")
        )  # fmt: skip
    trips = {n: _measure(h, s, "Redis round trips", "per request", _per_request(s, "round_trips"))
             for n, s in stacks.items() if n != "sql"}  # fmt: skip
    queries = {n: _measure(h, s, "SQL queries", "per 1,000 requests", _per_request(s, "sql", 1000))
               for n, s in stacks.items()}  # fmt: skip
    app_cpu = {n: _measure(h, s, "app CPU", "µs per request", _per_request(s, "cpu_seconds", 1e6))
               for n, s in stacks.items()}  # fmt: skip
    redis_cpu = {
        n: _measure(h, s, "Redis CPU", "µs per request", tuple(
            cpu * 1e6 / r.requests for cpu, r in zip(s.redis_cpu, s.reports, strict=True)
            if r.requests))
        for n, s in stacks.items() if n != "sql"
    }  # fmt: skip
    rows += [
        Row("Redis round trips per request", "per request", clients, trips["webtier"],
            trips["book"], goals=(Goal(0.5, at_least=False),),
            note="counted in the app process, one per command or pipeline sent"),
        Row("SQL queries per 1,000 requests: webtier vs the book", "per 1,000", clients,
            queries["webtier"], queries["book"]),
        Row("SQL queries per 1,000 requests: webtier vs SQL only", "per 1,000", clients,
            queries["webtier"], queries["sql"]),
        Row("app process CPU per request: webtier vs the book", "µs", clients,
            app_cpu["webtier"], app_cpu["book"]),
        Row("app process CPU per request: webtier vs SQL only", "µs", clients,
            app_cpu["webtier"], app_cpu["sql"]),
        Row("Redis server CPU per request: webtier vs the book", "µs", clients,
            redis_cpu["webtier"], redis_cpu["book"],
            note="the other stacks paused meanwhile; their background jobs included"),
    ]  # fmt: skip

    def p99_ms(key: str) -> tuple[float, ...]:
        return tuple(f[key] * 1000 for f in ours.figures if f[key] is not None)

    hits = _measure(
        h, ours, "cached item page in the app, p99", "ms", p99_ms("idle_hit_p99_seconds")
    )
    loaded = _measure(h, ours, "cached item page in the app under load, p99", "ms",
                      p99_ms("hit_p99_seconds"))  # fmt: skip

    def per_page(key: str) -> tuple[float, ...]:
        return tuple(f[key] for f in ours.figures if f[key] is not None)

    hit_trips = _measure(h, ours, "cached item page: Redis round trips", "per page",
                         per_page("idle_hit_round_trips"))  # fmt: skip
    filled = _measure(h, ours, "cached item page, filled for a logged-in visitor, p99", "ms",
                      p99_ms("idle_filled_hit_p99_seconds"))  # fmt: skip
    filled_trips = _measure(h, ours, "cached item page, filled: Redis round trips", "per page",
                            per_page("idle_filled_hit_round_trips"))  # fmt: skip
    cached_share = tuple(
        100 * f["top_views_without_sql"] / f["top_views"] for f in ours.figures if f["top_views"]
    )
    without_sql = _measure(
        h, ours, "anonymous top-10,000 item views without SQL", "%", cached_share
    )
    from_cache = _measure(
        h,
        ours,
        "item page views from the page cache",
        "%",
        tuple(
            100 * f["item_views_cached"] / f["item_views"] for f in ours.figures if f["item_views"]
        ),
    )
    with_session = _measure(
        h,
        ours,
        "item page views from the page cache, visitors with a session",
        "%",
        tuple(
            100 * f["session_item_views_cached"] / f["session_item_views"]
            for f in ours.figures
            if f["session_item_views"]
        ),
    )
    rows += [
        Row("cached item page (X-Cache: HIT), time in the app, p99", "ms", clients, hits, None,
            goals=(Goal(0.3, of="webtier", at_least=False, unit="ms"),),
            note=f"{IDLE_HITS} sequential requests after the load, from their arrival in the "
            f"app to the last byte, every middleware; under load (the event loop's queue "
            f"included) {loaded.value:.1f} ms" if loaded else ""),
        Row("anonymous views of the top 10,000 items served without SQL", "%", clients,
            without_sql, None, goals=(Goal(95, of="webtier", unit="%"),)),
        Row("item page views answered from the page cache, every visitor", "%", clients,
            from_cache, None, goals=(Goal(90, of="webtier", unit="%"),),
            note="X-Cache: HIT among the 200 answers of item pages, anonymous and with a "
            "session (#26: holes); of visitors with a session: "
            + (f"{with_session.value:.1f} %" if with_session else "none")),
        Row("cached item page: Redis round trips", "per page", 1, hit_trips, None,
            goals=(Goal(1, of="webtier", at_least=False, unit="round trip"),),
            note=f"counted in the app over the {IDLE_HITS} sequential hits, each request's "
            "own (a background flush is not a page's); target exactly 1"),
        Row("cached item page with a logged-in visitor's parts filled (holes), time in the "
            "app, p99", "ms", 1, filled, None,
            goals=(Goal(0.5, of="webtier", at_least=False, unit="ms"),),
            note=f"{IDLE_HITS} sequential requests of one logged-in visitor after the load, "
            "as the anonymous row (#26)"),
        Row("cached item page, filled: Redis round trips", "per page", 1, filled_trips, None,
            goals=(Goal(1, of="webtier", at_least=False, unit="round trip"),),
            note="the page, the session read and the view counted: one pipeline (#26)"),
    ]  # fmt: skip
    h.notes += [_round_trips_by_kind(stack) for name, stack in stacks.items() if name != "sql"]
    for stack in [*stacks.values(), *([two] if two else [])]:
        errors = sum(r.status("5xx") + r.transport_errors for r in stack.reports)
        if errors:
            h.notes.append(f"{NAMES[stack.name]}: {errors} 5xx answers or transport errors")
    h.notes.append(
        f"{clients} visitors at once, each browsing as webtier loadgen's model has it; "
        f"{h.settings.size(ITEMS):,} items; one uvicorn worker per stack (uvloop, httptools)"
    )
    if load.kind == "wrk":
        h.notes.append(
            "load: wrk, one connection per visitor, replaying the model's visits (seeded, "
            "made in Python) with their cookies and CSRF tokens; requests/s per route are "
            "counted, their latencies are not (wrk's are of all requests)"
        )
    else:
        h.notes.append("load: python, webtier loadgen's driver (its CPU bounds the figures)")
    return rows


def _round_trips_by_kind(stack: Stack, shown: int = 8) -> str:
    """Where a stack's round trips go, over its measured runs: the kinds of
    request that sent the most, each with its share of the requests, its
    round trips a request and its share of the round trips."""
    totals: dict[str, list[int]] = {}
    for figures in stack.figures:
        for kind, tally in figures["routes"].items():
            total = totals.setdefault(kind, [0, 0, 0])
            for i, value in enumerate(tally):
                total[i] += value
    requests = sum(t[0] for t in totals.values()) or 1
    trips = sum(t[1] for t in totals.values()) or 1
    ranked = sorted(totals.items(), key=lambda pair: -pair[1][1])[:shown]
    parts = [
        f"{kind} {100 * n / requests:.1f} % of requests, {sent / n:.2f} a request, "
        f"{100 * sent / trips:.1f} % of round trips"
        for kind, (n, sent, _) in ranked
    ]
    return f"{NAMES[stack.name]}: round trips by kind of request: " + "; ".join(parts)


def _requests(report: LoadReport, route: str | None) -> int:
    if route is None:
        return report.requests
    found = report.route(route)
    return 0 if found is None else found.requests
