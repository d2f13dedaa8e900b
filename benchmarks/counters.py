"""The counters benchmark: webtier's counters against the book's listings
5.3-5.5 (:mod:`benchmarks.book`), on the same server, in one run.

Rows (docs/benchmarks.md says more):

* record, unbatched -- ``tier.counters.record(name, 1)`` vs ``update_counter``,
  with 1 and N client processes, next to the raw limit of webtier's EVALSHA;
* redis-benchmark limit -- that EVALSHA vs the book's MULTI block, from C;
* record, batched -- ``recorder.incr(name)`` (closing flush included) vs
  ``update_counter`` from one process;
* get, 120 samples -- ``tier.counters.get`` vs ``get_counter``;
* clean, one pass -- ``tier.counters.clean(pass_number=0)`` vs one pass of
  ``clean_counters``, over 10,000 counters with stale samples and dead ones;
* memory per retained sample -- both layouts holding the same samples.
"""

from __future__ import annotations

import time
from functools import partial

from benchmarks import _counter_workloads as w
from benchmarks import book
from benchmarks._harness import Contender, Harness, Pass
from benchmarks._results import Goal, Measurement, Row
from webtier import counters
from webtier._core.protocol import Command, Request, ScriptCall
from webtier.config import Config
from webtier.types import CounterCleanReport

TITLE = "webtier bench counters"

READ_PRECISION = 60  # seconds; the read counter holds 120 samples of it
READ_SAMPLES = 120
CLEANUP_COUNTERS = 10_000
MEMORY_COUNTERS = 1_000
MEMORY_SAMPLES = 120

# What each side's client sends, for commandstats (EVALSHA and EXEC already
# hold the time of the commands run inside them).
WEBTIER_RECORD_COMMANDS = frozenset({"evalsha"})
BOOK_RECORD_COMMANDS = frozenset({"multi", "exec"})
READ_COMMANDS = frozenset({"hgetall"})
WEBTIER_CLEAN_COMMANDS = frozenset({"zscan", "evalsha"})
BOOK_CLEAN_COMMANDS = frozenset(
    {"zcard", "zrange", "hkeys", "hdel", "watch", "hlen", "multi", "exec", "unwatch"}
)

RECORD_NOTE = (
    "commandstats does not time the parsing and queuing of the 14 commands inside "
    "MULTI, so the book's server µs/op is low; server CPU µs/op (measurements) counts all"
)

# Targets (reported, never enforced).
RECORD_GOALS = {1: (Goal(1.5),), 4: (Goal(1.8),)}
BATCHED_GOALS = (Goal(150), Goal(500_000, "webtier", unit="incr/s"))
CLEAN_GOALS = (Goal(20), Goal(CLEANUP_COUNTERS / 3, "webtier", unit="counters/s"))
MEMORY_GOALS = (Goal(1.0, at_least=False),)


def run(h: Harness) -> list[Row]:
    """Every counters comparison, in the order of the report."""
    rows: list[Row] = []
    records = _record(h)
    raws = _raw_limits(h)
    for processes, (ours, theirs) in records.items():
        rows.append(
            Row(
                "record, unbatched",
                "ops/s",
                processes,
                ours,
                theirs,
                raw=raws.get(processes, (None, None))[0],
                goals=RECORD_GOALS.get(processes, ()),
                note=RECORD_NOTE,
            )
        )
    for clients, (ours_raw, book_raw) in raws.items():
        note = "book: ZADD and HINCRBY benchmarked apart (-P 16), 8 of each per MULTI block"
        rows.append(Row("redis-benchmark limit", "ops/s", clients, ours_raw, book_raw, note=note))
    book_single = records[1][1] if 1 in records else _record(h, (1,))[1][1]
    rows.append(
        Row(
            "record, batched (recorder)", "incr/s", 1, _batched(h), book_single, goals=BATCHED_GOALS
        )
    )
    rows.append(Row("get, 120 samples", "reads/s", 1, *_reads(h)))
    rows.append(_cleanup(h))
    rows.append(_memory(h))
    return rows


def _record(
    h: Harness, processes: tuple[int, ...] | None = None
) -> dict[int, tuple[Measurement, Measurement]]:
    found = {}
    for n in processes or h.settings.processes:
        h.server.flush()
        ours, theirs = h.loops(
            [
                Contender(
                    "webtier counters.record",
                    partial(w.webtier_record, h.server.url),
                    WEBTIER_RECORD_COMMANDS,
                ),
                Contender(
                    "book update_counter",
                    partial(w.book_record, h.server.book_url),
                    BOOK_RECORD_COMMANDS,
                ),
            ],
            n,
        )
        found[n] = (ours, theirs)
    return found


def record_command(config: Config, name: str) -> Command:
    """The command ``counters.record(name, 1)`` sends now, as webtier builds it."""
    step = next(counters.ops.record(config, name, 1))
    if not isinstance(step, Request):
        raise TypeError(f"record sent {step!r}, not one request")
    (command,) = step.commands
    return command.command() if isinstance(command, ScriptCall) else command


def _raw_limits(h: Harness) -> dict[int, tuple[Measurement | None, Measurement | None]]:
    h.server.flush()
    name = w.NAMES[0]
    ours = record_command(Config(), name)
    h.server.admin.script_load(counters.ops.RECORD.source)
    slice_start = int(time.time())
    zadd = ("ZADD", "known:", 0, f"1:{name}")
    hincrby = ("HINCRBY", f"count:1:{name}", slice_start, 1)
    found: dict[int, tuple[Measurement | None, Measurement | None]] = {}
    for clients in h.settings.processes:
        found[clients] = (
            h.raw("raw: webtier EVALSHA", [(ours, 1)], clients, h.server.admin),
            h.raw(
                "raw: book MULTI block (estimate)",
                [(zadd, 8), (hincrby, 8)],
                clients,
                h.server.book_admin,
                pipeline=16,
                note="16 commands a round trip; see the redis-benchmark limit row",
            ),
        )
    return found


def _batched(h: Harness) -> Measurement:
    h.server.flush()
    contender = Contender(
        "webtier recorder.incr", partial(w.webtier_recorder, h.server.url), frozenset({"evalsha"})
    )
    (measurement,) = h.loops([contender], 1, unit="incr/s")
    return measurement


def _reads(h: Harness) -> tuple[Measurement, Measurement]:
    h.server.flush()
    name = "read:/item/1"
    events = w.spread_events(name, READ_SAMPLES, READ_PRECISION, time.time())
    with w.tier_on(h.server.url) as tier:
        for _, at in events:
            tier.counters.record(name, 1, now=at)
        ours = tier.counters.get(name, READ_PRECISION)
    with w.client_on(h.server.book_url) as conn:
        for _, at in events:
            book.update_counter(conn, name, 1, now=at)
        theirs = book.get_counter(conn, name, READ_PRECISION)
    if ours != theirs or len(ours) != READ_SAMPLES:
        raise RuntimeError(f"the read counters differ: {len(ours)} vs {len(theirs)} samples")
    ours_m, theirs_m = h.loops(
        [
            Contender(
                "webtier counters.get",
                partial(w.webtier_get, h.server.url, name, READ_PRECISION),
                READ_COMMANDS,
            ),
            Contender(
                "book get_counter",
                partial(w.book_get, h.server.book_url, name, READ_PRECISION),
                READ_COMMANDS,
            ),
        ],
        1,
        unit="reads/s",
    )
    return ours_m, theirs_m


def _cleanup(h: Harness) -> Row:
    size = h.settings.size(CLEANUP_COUNTERS)
    reports: list[CounterCleanReport] = []

    def prepare_ours() -> None:
        h.server.flush()
        w.load_webtier(h.server.url, w.cleanup_events(size, time.time()))

    def prepare_theirs() -> None:
        h.server.flush()
        w.load_book(h.server.book_url, w.cleanup_events(size, time.time()))

    with (
        w.tier_on(h.server.url) as tier,
        w.client_on(h.server.book_url, decode_responses=True) as conn,
    ):

        def ours() -> int:
            reports.append(tier.counters.clean(pass_number=0))
            return size

        def theirs() -> int:
            book.clean_counters_pass(conn, passes=0)
            return size

        unit = "counters/s"
        ours_m, theirs_m = h.passes(
            [
                Pass("webtier counters.clean", prepare_ours, ours, WEBTIER_CLEAN_COMMANDS),
                Pass("book clean_counters", prepare_theirs, theirs, BOOK_CLEAN_COMMANDS),
            ],
            unit,
        )
        left = conn.zcard("known:")
    last = reports[-1]
    note = (
        f"{size:,} counters; webtier dropped {last.samples_dropped:,} samples and unlisted "
        f"{last.counters_unlisted:,} counters; the book's pass walked "
        f"{size * len(book.PRECISION):,} index entries and left {left:,}"
    )
    return Row("clean, one pass", "counters/s", 1, ours_m, theirs_m, goals=CLEAN_GOALS, note=note)


def _memory(h: Harness) -> Row:
    size = h.settings.size(MEMORY_COUNTERS)
    events = w.memory_events(size, MEMORY_SAMPLES, time.time())
    names = sorted({name for name, _ in events})
    unit = "bytes/sample"
    ours = h.memory(
        "webtier layout",
        partial(w.load_webtier, h.server.url, events),
        partial(w.count_webtier_samples, h.server.url, names),
        unit,
    )
    theirs = h.memory(
        "book layout",
        partial(w.load_book, h.server.book_url, events),
        partial(w.count_book_samples, h.server.book_url),
        unit,
    )
    h.server.flush()
    note = (
        f"{size:,} counters x {len(book.PRECISION)} precisions x {MEMORY_SAMPLES} samples; "
        "all keys, TTLs and index entries included"
    )
    if size < MEMORY_COUNTERS:
        note += "; scaled down, so fixed costs weigh more: compare at --scale 1"
    return Row(
        "memory per retained sample", unit, None, ours, theirs, goals=MEMORY_GOALS, note=note
    )
