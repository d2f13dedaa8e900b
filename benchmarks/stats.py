"""The statistics benchmark: webtier's stats against the book's listings
5.6-5.8 (:mod:`benchmarks.book`), on the same server, in one run.

Rows (docs/benchmarks.md says more):

* update_stats -- ``tier.stats.record(context, "AccessTime", v)`` vs the
  book's ``update_stats``, 1 and N processes, next to the raw limit of
  webtier's EVALSHA from ``redis-benchmark``;
* update_stats, batched -- ``tier.stats.recorder()``'s ``record`` (values
  merged every 0.1 s, one script call per context) vs the same book listing;
* server CPU per update -- the server process's CPU time per update, each side;
* access_time, empty block -- webtier's timer vs the book's context manager;
* histograms on / off -- the cost of percentiles: update time with
  histograms over update time without, per interleaved round;
* slowest -- the exact ranking read over 100 contexts (the book has no reader);
* memory per context and hour -- with and without histograms, vs the book's
  five-member zset for the same values.
"""

from __future__ import annotations

from functools import partial

from benchmarks import _stats_workloads as w
from benchmarks._harness import Contender, Harness
from benchmarks._results import Goal, Measurement, Row
from webtier import stats
from webtier._core.protocol import Command, Request, ScriptCall
from webtier.config import ACCESS_TIME, Config
from webtier.stats.histogram import bucket_of

TITLE = "webtier bench stats"

MEMORY_CONTEXTS = 50
MEMORY_SAMPLES = 400
SLOWEST_CONTEXTS = 100

# What each side's client sends, for commandstats (EVALSHA and EXEC already
# hold the time of the commands run inside them).
WEBTIER_COMMANDS = frozenset({"evalsha"})
BOOK_COMMANDS = frozenset({"watch", "get", "multi", "exec", "unwatch"})

# Targets (reported, never enforced).
UPDATE_GOALS = {1: (Goal(2.5),), 4: (Goal(3.0),)}
CPU_GOALS = (Goal(0.5, at_least=False),)
ACCESS_GOALS = (Goal(3.0),)
HISTOGRAM_GOALS = (Goal(1.3, "webtier", at_least=False, unit="x"),)

CPU_NOTE = (
    "server process CPU (INFO cpu, user + system) per update, network system calls "
    "included: the book's 3 round trips each cost their reads and writes"
)


BATCHED_NOTE = (
    "values summed per context in process and merged every 0.1 s (stats_merge.lua, one "
    "call per context per flush): they reach Redis up to 0.1 s late"
)


def run(h: Harness) -> list[Row]:
    """Every statistics comparison, in the order of the report."""
    rows: list[Row] = []
    updates = _updates(h)
    raws = _raw_limits(h)
    for processes, (ours, batched, theirs) in updates.items():
        rows.append(
            Row(
                "update_stats",
                "ops/s",
                processes,
                ours,
                theirs,
                raw=raws.get(processes),
                goals=UPDATE_GOALS.get(processes, ()),
            )
        )
        rows.append(
            Row("update_stats, batched", "ops/s", processes, batched, theirs, note=BATCHED_NOTE)
        )
    for processes, (ours, batched, theirs) in updates.items():
        for name, mine in (("", ours), (", batched", batched)):
            rows.append(
                Row(
                    f"server CPU per update{name}",
                    "CPU µs/op",
                    processes,
                    _cpu(mine),
                    _cpu(theirs),
                    goals=CPU_GOALS,
                    note=CPU_NOTE,
                )
            )
    rows.append(_access(h))
    rows.append(_histograms(h))
    rows.append(_slowest(h))
    rows.extend(_memory(h))
    return rows


def _updates(h: Harness) -> dict[int, tuple[Measurement, Measurement, Measurement]]:
    found = {}
    for n in h.settings.processes:
        h.server.flush()
        ours, batched, theirs = h.loops(
            [
                Contender(
                    "webtier stats.record",
                    partial(w.webtier_record, h.server.url),
                    WEBTIER_COMMANDS,
                ),
                Contender(
                    "webtier stats.recorder",
                    partial(w.webtier_batched, h.server.url),
                    WEBTIER_COMMANDS,
                ),
                Contender(
                    "book update_stats", partial(w.book_record, h.server.book_url), BOOK_COMMANDS
                ),
            ],
            n,
        )
        found[n] = (ours, batched, theirs)
    return found


def _cpu(m: Measurement) -> Measurement:
    """The server CPU µs per operation of ``m``, as a figure of its own."""
    return Measurement(f"{m.name}: server CPU", m.clients, "CPU µs/op", m.cpu_us)


def record_command(config: Config) -> Command:
    """The command ``stats.record`` sends now for the bench's first context."""
    step = next(stats.ops.record(config, w.CONTEXTS[0], ACCESS_TIME, w.VALUES[0]))
    if not isinstance(step, Request):
        raise TypeError(f"record sent {step!r}, not one request")
    (command,) = step.commands
    return command.command() if isinstance(command, ScriptCall) else command


def _raw_limits(h: Harness) -> dict[int, Measurement | None]:
    h.server.flush()
    h.server.admin.script_load(stats.ops.RECORD.source)
    command = record_command(Config(stats=w.settings()))
    note = "the same context and value every time; at the turn of the hour, a refused guess"
    return {
        clients: h.raw("raw: webtier EVALSHA", [(command, 1)], clients, h.server.admin, note=note)
        for clients in h.settings.processes
    }


def _access(h: Harness) -> Row:
    h.server.flush()
    ours, theirs = h.loops(
        [
            Contender(
                "webtier stats.access_time",
                partial(w.webtier_access, h.server.url),
                WEBTIER_COMMANDS,
            ),
            Contender("book access_time", partial(w.book_access, h.server.book_url), BOOK_COMMANDS),
        ],
        1,
    )
    note = "an empty block: the cost of timing and recording it (book: 4 round trips)"
    return Row("access_time, empty block", "ops/s", 1, ours, theirs, goals=ACCESS_GOALS, note=note)


def _histograms(h: Harness) -> Row:
    h.server.flush()
    on, off = h.loops(
        [
            Contender(
                "webtier record, histograms on",
                partial(w.webtier_record, h.server.url, True),
                WEBTIER_COMMANDS,
            ),
            Contender(
                "webtier record, histograms off",
                partial(w.webtier_record, h.server.url, False),
                WEBTIER_COMMANDS,
            ),
        ],
        1,
    )
    # Cost is time per update: on / off = off's rate / on's, round by round
    # (each round runs both, back to back).
    ratios = tuple(b / a for a, b in zip(on.values, off.values, strict=True))
    cost = Measurement("update cost, histograms on / off", 1, "x", ratios)
    cpu_on, cpu_off = on.cpu_us_per_op, off.cpu_us_per_op
    note = (
        f"time per update with histograms over time without; server CPU "
        f"{cpu_on or 0:.1f} vs {cpu_off or 0:.1f} µs/op"
    )
    return Row("histograms on / off", "x", 1, cost, None, goals=HISTOGRAM_GOALS, note=note)


def _slowest(h: Harness) -> Row:
    h.server.flush()
    size = h.settings.size(SLOWEST_CONTEXTS)
    w.load_webtier(h.server.url, size, 20, histograms=True)
    (ours,) = h.loops(
        [Contender("webtier stats.slowest(10)", partial(w.webtier_slowest, h.server.url, 10))],
        1,
        unit="reads/s",
    )
    note = (
        f"exact top 10 of {size} contexts by mean: the listings of 64 shards, then "
        "every context's record (the book keeps a trimmed zset and has no reader)"
    )
    return Row("slowest, exact", "reads/s", 1, ours, None, note=note)


def _memory(h: Harness) -> list[Row]:
    contexts = h.settings.size(MEMORY_CONTEXTS)
    unit = "bytes/context"

    def measure(name: str, url: str, pattern: str, load: partial[None]) -> Measurement:
        h.say(f"{name}: loading")
        h.server.flush()
        load()
        used = w.key_bytes(url, pattern)
        note = f"{used:,} bytes for {contexts}"
        measurement = Measurement(name, 1, unit, (used / contexts,), note=note)
        h.measurements.append(measurement)
        return measurement

    book = measure(
        "book layout",
        h.server.book_url,
        "stats:*",
        partial(w.load_book, h.server.book_url, contexts, MEMORY_SAMPLES),
    )
    layout = w.settings().sub_buckets
    buckets = len({bucket_of(v, layout) for v in w.VALUES[:MEMORY_SAMPLES]})
    rows = []
    for histograms in (False, True):
        label = "on" if histograms else "off"
        ours = measure(
            f"webtier layout, histograms {label}",
            h.server.url,
            "webtier:*",
            partial(w.load_webtier, h.server.url, contexts, MEMORY_SAMPLES, histograms),
        )
        kept = f", and {buckets} histogram buckets (percentiles)" if histograms else ""
        note = (
            f"{contexts} contexts x {MEMORY_SAMPLES} values in one hour, MEMORY USAGE of every "
            "key (TTLs, about 30 bytes a key, not included); webtier keeps count, sum, m2, "
            f"min, max and a listing entry{kept}; the book a five-member zset"
        )
        what = f"memory per context and hour, histograms {label}"
        rows.append(Row(what, unit, None, ours, book, note=note))
    h.server.flush()
    return rows
