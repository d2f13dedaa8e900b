"""The page cache benchmark, in one run on one server.

Rows (docs/benchmarks.md says more):

* cache hit, library level, one client: ``tier.pagecache.serve()`` of a
  cached item page (one ``GET``) vs the
  book's ``cache_request`` (Listings 2.6 and 2.8: ``ZRANK``, then ``GET``)
  vs one bare redis-py ``GET`` of the same stored page;
* through a real ASGI app (Starlette under uvicorn, in a process of its
  own): requests/s and p50/p99 latency of a hit vs the uncached 20 ms render;
* a stampede: 200 concurrent requests to a cold page, and how many renders.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from functools import partial

import httpx

from benchmarks import book
from benchmarks._counter_workloads import client_on, tier_on
from benchmarks._harness import Contender, Harness
from benchmarks._loops import Loop
from benchmarks._page_app import BODY, serve
from benchmarks._results import Goal, Measurement, Row
from webtier._core.protocol import Call
from webtier.config import Config
from webtier.pagecache import BOOK_RULES, PageRequest
from webtier.testing import free_port
from webtier.types import Rendered

TITLE = "webtier bench pagecache"

URL = "http://shop.test/item?item=1"
HITS_PER_STEP = 10
STAMPEDE = 200
HIT_COMMANDS = frozenset({"get"})
BOOK_COMMANDS = frozenset({"get", "zrank"})

LIBRARY_GOALS = (Goal(2),)
BARE_GET_GOALS = (Goal(0.77),)  # within 1.3x of a bare GET
APP_GOALS = (Goal(20),)
STAMPEDE_GOALS = (Goal(1, of="webtier", at_least=False, unit="render"),)


def _render() -> Rendered:
    return Rendered(200, (("content-length", str(len(BODY))),), BODY, 300.0)


@contextlib.contextmanager
def webtier_hit(url: str) -> Iterator[Loop]:
    with tier_on(url) as tier:
        tier.ranking.record_view("1")
        plan = BOOK_RULES.plan(tier.config, PageRequest.from_url(URL))
        assert plan is not None
        serve_page, render = tier.pagecache.serve, Call(_render)
        serve_page(plan, render)  # stores it

        def step() -> None:
            for _ in range(HITS_PER_STEP):
                if serve_page(plan, render).outcome != "HIT":
                    raise RuntimeError("the page was not a hit")

        yield Loop(step, HITS_PER_STEP)


@contextlib.contextmanager
def book_hit(book_url: str) -> Iterator[Loop]:
    with client_on(book_url) as conn:
        conn.zadd("viewed:", {"1": -1})  # the book counts views down from 0
        book.cache_request(conn, URL, lambda request: BODY)

        def fail(request: str) -> bytes:
            raise RuntimeError("the book's page was not cached")

        def step() -> None:
            for _ in range(HITS_PER_STEP):
                book.cache_request(conn, URL, fail)

        yield Loop(step, HITS_PER_STEP)


@contextlib.contextmanager
def bare_get(url: str) -> Iterator[Loop]:
    with tier_on(url) as tier, client_on(url) as conn:
        plan = BOOK_RULES.plan(tier.config, PageRequest.from_url(URL))
        assert plan is not None
        tier.ranking.record_view("1")
        tier.pagecache.serve(plan, Call(_render))
        key = plan.shard.page(plan.digest)
        get = conn.get

        def step() -> None:
            for _ in range(HITS_PER_STEP):
                get(key)

        yield Loop(step, HITS_PER_STEP)


def run(h: Harness) -> list[Row]:
    return [*_library(h), *_through_app(h)]


def _library(h: Harness) -> list[Row]:
    h.server.flush()
    url, book_url = h.server.url, h.server.book_url
    ours, theirs, bare = h.loops(
        [
            Contender("webtier pagecache.serve, hit", partial(webtier_hit, url), HIT_COMMANDS),
            Contender("book cache_request, hit", partial(book_hit, book_url), BOOK_COMMANDS),
            Contender("one bare GET of the page", partial(bare_get, url), frozenset({"get"})),
        ],
        1,
        unit="hits/s",
    )
    config_key = _page_key()
    raw = h.raw("raw: GET of the cached page", [(("GET", config_key), 1)], 1, h.server.admin)
    return [
        Row(
            "cache hit, item page, 1 client",
            "hits/s",
            1,
            ours,
            theirs,
            raw=raw,
            goals=LIBRARY_GOALS,
            note="webtier: one GET (the rank is read on a miss, with the claim); "
            "book: ZRANK, then GET",
        ),
        Row(
            "cache hit vs one bare GET, 1 client",
            "hits/s",
            1,
            ours,
            bare,
            goals=BARE_GET_GOALS,
            note="book column: redis-py GET of the same stored page (target: within 1.3x)",
        ),
    ]


def _page_key() -> str:
    plan = BOOK_RULES.plan(Config(), PageRequest.from_url(URL))
    assert plan is not None
    return plan.shard.page(plan.digest)


# -- through uvicorn --------------------------------------------------------------------------


@contextlib.contextmanager
def app_server(redis_url: str) -> Iterator[str]:
    port = free_port()
    process = multiprocessing.get_context("spawn").Process(
        target=serve, args=(redis_url, "webtier", port), daemon=True
    )
    process.start()
    try:
        deadline = time.time() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if time.time() > deadline or not process.is_alive():
                raise RuntimeError("the benchmark's uvicorn server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.join(10)
        if process.is_alive():
            process.kill()


class _Connection:
    """A minimal HTTP/1.1 keep-alive client on a plain socket, so that the
    load generator costs little next to the server it measures (an httpx
    client costs more per request than the cached answer itself)."""

    def __init__(self, base: str, path: str) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), 30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: gzip\r\n\r\n"
        ).encode()
        self.buffer = b""

    def get(self) -> int:
        """Send the request; return the status once the whole body is read."""
        self.sock.sendall(self.request)
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self.buffer) < length:
            self.buffer += self._recv()
        self.buffer = self.buffer[length:]
        return int(lines[0].split()[1])

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk

    def close(self) -> None:
        self.sock.close()


def _load(base: str, path: str, clients: int, seconds: float) -> tuple[float, list[float]]:
    """Requests/s and latencies (s) of ``clients`` threads asking for ``path``."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    stop_at: list[float] = []

    def client(mine: list[float]) -> None:
        connection = _Connection(base, path)
        try:
            if connection.get() != 200:  # connected before the clock starts
                raise RuntimeError(f"{path} did not answer 200")
            start.wait()
            while time.perf_counter() < stop_at[0]:
                began = time.perf_counter()
                if connection.get() != 200:
                    raise RuntimeError(f"{path} did not answer 200")
                mine.append(time.perf_counter() - began)
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(mine,)) for mine in latencies]
    for thread in threads:
        thread.start()
    stop_at.append(time.perf_counter() + 1e9)
    start.wait()
    began = time.perf_counter()
    stop_at[0] = began + seconds
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    every = [x for mine in latencies for x in mine]
    return len(every) / elapsed, every


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[98] * 1000


async def _stampede(base: str, path: str) -> int:
    limits = httpx.Limits(max_connections=STAMPEDE)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=120) as http:
        responses = await asyncio.gather(*(http.get(path) for _ in range(STAMPEDE)))
    for response in responses:
        response.raise_for_status()
    return sum(1 for r in responses if r.headers.get("x-cache") == "MISS")


def _through_app(h: Harness) -> list[Row]:
    h.server.flush()
    clients = max(h.settings.processes)
    rows = []
    with app_server(h.server.url) as base:
        hit_rates, render_rates, renders = [], [], []
        hit_lat: list[float] = []
        render_lat: list[float] = []
        for n in range(h.settings.repeat):
            h.say(f"uvicorn: hits, {clients} clients, run {n + 1}/{h.settings.repeat}")
            rate, lat = _load(base, "/page", clients, h.settings.seconds)
            hit_rates.append(rate)
            hit_lat += lat
            h.say(f"uvicorn: uncached 20 ms renders, run {n + 1}/{h.settings.repeat}")
            rate, lat = _load(base, "/page?_=1", clients, h.settings.seconds)
            render_rates.append(rate)
            render_lat += lat
            h.say(f"uvicorn: {STAMPEDE} concurrent requests to a cold page")
            renders.append(float(asyncio.run(_stampede(base, f"/cold/{n}"))))
        hit_p50, hit_p99 = _percentiles(hit_lat)
        render_p50, render_p99 = _percentiles(render_lat)
        hits = Measurement("uvicorn + webtier, hit", clients, "req/s", tuple(hit_rates))
        uncached = Measurement(
            "uvicorn, uncached 20 ms render", clients, "req/s", tuple(render_rates)
        )
        stampede = Measurement(
            f"renders for {STAMPEDE} concurrent requests", STAMPEDE, "renders", tuple(renders)
        )
        for m in (hits, uncached, stampede):
            h.measurements.append(m)
        rows.append(
            Row(
                "through uvicorn: hit vs uncached 20 ms render",
                "req/s",
                clients,
                hits,
                uncached,
                goals=APP_GOALS,
                note=(
                    f"p50/p99: hit {hit_p50:.2f}/{hit_p99:.2f} ms, "
                    f"render {render_p50:.1f}/{render_p99:.1f} ms; "
                    f"{clients} keep-alive client connections, one uvicorn process"
                ),
            )
        )
        rows.append(
            Row(
                f"stampede: {STAMPEDE} concurrent requests to a cold page",
                "renders",
                STAMPEDE,
                stampede,
                None,
                goals=STAMPEDE_GOALS,
                note="renders counted as X-Cache: MISS answers (the others waited for it)",
            )
        )
    return rows
