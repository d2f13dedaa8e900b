"""The transport benchmark: client CPU per Redis round trip, webtier's own
asyncio client against redis-py's, and webtier's asyncio operations against
the book's listings on redis-py's asyncio client.

Client CPU is the process's CPU time (``time.process_time``: user + system,
every thread) over a fixed number of calls, divided by that number; the
server runs in its own process and is not counted. Each figure is the
median of ``--repeat`` runs, each in a new event loop, after a warm-up that
connects. ``--seconds`` does not apply: the work is fixed, not the time
(``--scale`` multiplies it).

Rows (docs/benchmarks.md and docs/transport.md say more):

* one EVALSHA round trip, 1 and 16 concurrent tasks, asyncio's own loop and
  uvloop -- webtier's transport (an AsyncWebTier's path: one request through
  ``MuxTransport.exchange``) against redis-py's asyncio client sending one
  command; a table adds redis-py's one-command pipeline (webtier's path
  before its own client) and redis-py's sync client called on the loop (the
  book's stack in an asyncio app);
* operations -- ``sessions.touch`` with an item, ``counters.record``,
  ``stats.record`` on an AsyncWebTier against the book's ``update_token``,
  ``update_counter``, ``update_stats`` ported to redis-py's asyncio client
  (:mod:`benchmarks.book_async`), as operations per client CPU second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import redis
import redis.asyncio

import webtier
from benchmarks import book_async
from benchmarks._harness import Harness
from benchmarks._results import Goal, Measurement, Row, Table
from webtier._core.mux import MuxTransport
from webtier._core.protocol import Request
from webtier.config import Config, RetryPolicy

TITLE = "webtier bench transport"

ROUND_TRIPS = 20_000  # calls per measurement (times --scale)
OPERATIONS = 4_000
TASKS = (1, 16)
WARM_UP = 200
SCRIPT = "return redis.call('INCR', KEYS[1])"
KEY = "transport:n"

# Targets (reported, never enforced): webtier's CPU per round trip over
# redis-py asyncio's; operations per CPU second over the book's.
ROUND_TRIP_GOALS = {1: Goal(0.35, at_least=False), 16: Goal(0.12, at_least=False)}
OPERATION_GOALS = {1: Goal(5), 16: Goal(10)}

Call = Callable[[], Awaitable[Any]]
Maker = Callable[[str], Awaitable[tuple[Call, Callable[[], Awaitable[None]]]]]


def _loops() -> dict[str, Callable[[], asyncio.AbstractEventLoop] | None]:
    loops: dict[str, Callable[[], asyncio.AbstractEventLoop] | None] = {"asyncio": None}
    try:
        import uvloop
    except ImportError:
        return loops
    loops["uvloop"] = uvloop.new_event_loop
    return loops


# -- the clients, one EVALSHA each ----------------------------------------------------------


async def _sha(url: str) -> str:
    client = redis.asyncio.Redis.from_url(url)
    try:
        return str(await client.script_load(SCRIPT))
    finally:
        await client.aclose()


async def redispy_command(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    sha, client = await _sha(url), redis.asyncio.Redis.from_url(url)
    return (lambda: client.evalsha(sha, 1, KEY)), client.aclose


async def redispy_pipeline(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    sha, client = await _sha(url), redis.asyncio.Redis.from_url(url)

    async def call() -> Any:
        pipe = client.pipeline(transaction=False)
        pipe.evalsha(sha, 1, KEY)
        return await pipe.execute()

    return call, client.aclose


async def redispy_sync(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    sha, client = await _sha(url), redis.Redis.from_url(url)

    async def call() -> Any:
        return client.evalsha(sha, 1, KEY)

    async def close() -> None:
        client.close()

    return call, close


async def webtier_transport(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    sha, client = await _sha(url), webtier.connect_async(url)
    transport = MuxTransport(client, RetryPolicy())
    step = Request(KEY, (("EVALSHA", sha, 1, KEY),), idempotent=False)
    return (lambda: transport.exchange(step)), client.aclose


CLIENTS: dict[str, Maker] = {
    "redis-py asyncio, one command": redispy_command,
    "redis-py asyncio, one-command pipeline": redispy_pipeline,
    "redis-py sync client on the loop": redispy_sync,
    "webtier's transport": webtier_transport,
}


# -- measuring ------------------------------------------------------------------------------


def cpu_per_call(
    make: Callable[[], Awaitable[tuple[Call, Callable[[], Awaitable[None]]]]],
    tasks: int,
    calls: int,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None,
) -> float:
    """Client CPU µs per call: ``calls`` calls, spread over ``tasks`` tasks."""

    async def main() -> float:
        call, close = await make()
        try:
            for _ in range(WARM_UP):
                await call()
            each = max(1, calls // tasks)

            async def worker() -> None:
                for _ in range(each):
                    await call()

            began = time.process_time()
            await asyncio.gather(*(worker() for _ in range(tasks)))
            return (time.process_time() - began) / (each * tasks) * 1e6
        finally:
            await close()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main())


def _measure(
    harness: Harness, what: str, tasks: int, unit: str, sides: dict[str, Callable[[], float]]
) -> dict[str, Measurement]:
    """Each side ``--repeat`` times, the sides taking turns run by run (so a
    machine that gets busier or quieter meanwhile weighs on every side)."""
    values: dict[str, list[float]] = {name: [] for name in sides}
    harness.ticker.begin(f"{what}, {tasks} task(s)", harness.settings.repeat)
    for turn in range(harness.settings.repeat):
        names = list(sides)
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            values[name].append(sides[name]())
        harness.ticker.tick()
    return {
        name: harness.record(Measurement(name, tasks, unit, tuple(found)))
        for name, found in values.items()
    }


def round_trips(harness: Harness) -> list[Row]:
    url = harness.server.url
    calls = harness.settings.size(ROUND_TRIPS)
    loops = _loops()
    found: dict[tuple[str, int, str], Measurement] = {}
    for loop_name, factory in loops.items():
        for tasks in TASKS:
            harness.say(f"EVALSHA round trips, {tasks} task(s), {loop_name}")
            sides: dict[str, Callable[[], float]] = {
                f"{name} ({loop_name})": partial(
                    cpu_per_call, partial(maker, url), tasks, calls, factory
                )
                for name, maker in CLIENTS.items()
            }
            measured = _measure(
                harness, f"round trips ({loop_name})", tasks, "client CPU µs per round trip", sides
            )
            for name in CLIENTS:
                found[name, tasks, loop_name] = measured[f"{name} ({loop_name})"]
    columns = [f"{t} task{'s' if t > 1 else ''}, {loop}" for loop in loops for t in TASKS]
    cells = tuple(
        (name, *(f"{found[name, t, loop].value:.1f}" for loop in loops for t in TASKS))
        for name in CLIENTS
    )
    records = tuple(
        {"client": name, "tasks": tasks, "loop": loop, "cpu_us": measured.value}
        for (name, tasks, loop), measured in found.items()
    )
    harness.tables.append(
        Table("client CPU µs per EVALSHA round trip", ("client", *columns), cells, records)
    )
    return [
        Row(
            f"EVALSHA round trip ({loop_name})",
            "client CPU µs",
            tasks,
            found["webtier's transport", tasks, loop_name],
            found["redis-py asyncio, one command", tasks, loop_name],
            goals=(ROUND_TRIP_GOALS[tasks],),
            note="book column: redis-py's asyncio client, one command",
        )
        for loop_name in loops
        for tasks in TASKS
    ]


# -- operations -----------------------------------------------------------------------------

TOKENS = 256
Operation = Callable[[int], Awaitable[Any]]
Side = tuple[dict[str, Operation], Callable[[], Awaitable[None]]]


async def webtier_operations(
    url: str,
) -> tuple[dict[str, Operation], Callable[[], Awaitable[None]]]:
    client = webtier.connect_async(url)
    tier = webtier.AsyncWebTier(client, Config(prefix="bench"))
    tokens = [await tier.sessions.new() for _ in range(TOKENS)]
    operations: dict[str, Operation] = {
        "touch with an item": lambda i: tier.sessions.touch(
            tokens[i % TOKENS], item=f"item{i % 1000}"
        ),
        "counters.record": lambda i: tier.counters.record("hits"),
        "stats.record": lambda i: tier.stats.record("page", "AccessTime", 0.125),
    }
    return operations, client.aclose


async def book_operations(url: str) -> Side:
    conn = redis.asyncio.Redis.from_url(url, decode_responses=True)
    tokens = [f"token{i}" for i in range(TOKENS)]
    operations: dict[str, Operation] = {
        "touch with an item": lambda i: book_async.update_token(
            conn, tokens[i % TOKENS], f"user{i % TOKENS}", f"item{i % 1000}"
        ),
        "counters.record": lambda i: book_async.update_counter(conn, "hits"),
        "stats.record": lambda i: book_async.update_stats(conn, "page", "AccessTime", 0.125),
    }
    return operations, conn.aclose


def ops_per_cpu_second(
    side: Callable[[str], Awaitable[Side]],
    url: str,
    name: str,
    tasks: int,
    count: int,
) -> float:
    """Operations per second of client CPU: ``count`` of ``name`` over ``tasks`` tasks."""

    async def main() -> float:
        operations, close = await side(url)
        operation = operations[name]
        try:
            for i in range(WARM_UP):
                await operation(i)
            each = max(1, count // tasks)

            async def worker(offset: int) -> None:
                for i in range(offset, offset + each):
                    await operation(i)

            began = time.process_time()
            await asyncio.gather(*(worker(n * each) for n in range(tasks)))
            return (each * tasks) / max(time.process_time() - began, 1e-9)
        finally:
            await close()

    with asyncio.Runner() as runner:
        return runner.run(main())


def operations(harness: Harness) -> list[Row]:
    count = harness.settings.size(OPERATIONS)
    rows = []
    names = ("touch with an item", "counters.record", "stats.record")
    for name in names:
        for tasks in TASKS:
            harness.say(f"{name}, {tasks} task(s)")
            sides: dict[str, Callable[[], float]] = {
                f"{name} ({label})": partial(ops_per_cpu_second, side, url, name, tasks, count)
                for label, side, url in (
                    ("webtier", webtier_operations, harness.server.url),
                    ("book", book_operations, harness.server.book_url),
                )
            }
            found = _measure(harness, name, tasks, "ops per client CPU second", sides)
            rows.append(
                Row(
                    name,
                    "ops/client CPU s",
                    tasks,
                    found[f"{name} (webtier)"],
                    found[f"{name} (book)"],
                    goals=(OPERATION_GOALS[tasks],),
                    note="book: its listing on redis-py's asyncio client",
                )
            )
    return rows


def run(harness: Harness) -> list[Row]:
    harness.notes.append(
        "client CPU: time.process_time over a fixed number of calls; medians of "
        f"{harness.settings.repeat} runs, each in a new event loop"
    )
    rows = round_trips(harness)
    harness.server.flush()
    rows += operations(harness)
    return rows
