"""The capacity benchmark: the measured inputs of :mod:`webtier.capacity`,
and (``--check``) the model's prediction against a run of a small shop.

Inputs, on one server:

* per hot operation (the Cluster bench's workloads, with the most client
  processes of ``--processes``): server CPU µs (``used_cpu_user +
  used_cpu_sys``), and network bytes in and out (``total_net_input_bytes``,
  ``total_net_output_bytes``), per operation; a page hit's reply without the
  page itself, which the model adds by the shop's page size;
* ``used_memory`` growth per stored thing: a full session, a counter sample,
  a statistic's period, a cached page (two sizes of incompressible body,
  fitted as overhead + size), a cached row, a ranked item.

The check writes a small shop through the public API in stages (sessions with
their views and carts, counters, statistics, pages, rows), reads
``used_memory`` after each, and runs the shop's mixed page requests; it
compares each with what the model, with its stored constants
(:data:`webtier.capacity.MEASURED`), predicts.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from benchmarks import _capacity_loads as loads
from benchmarks import _cluster_workloads as workloads
from benchmarks._harness import Harness
from benchmarks._loops import Workers
from benchmarks._nodes import Nodes, RunFigures, measure_run, setup_workers, single_server
from benchmarks._render import number
from benchmarks._results import Row, Table
from webtier import capacity
from webtier.sync import WebTier

TITLE = "webtier bench capacity"

SESSIONS = 20_000
COUNTERS = 200  # x 7 precisions x 120 samples
STATS_CONTEXTS = 200
PAGES = 300  # per size
PAGE_SIZES = (2_000, 20_000)
ROWS = 5_000
RANKED = 20_000

# The small shop of the check (x --scale).
CHECK_SESSIONS = 2_000
CHECK_ITEMS = 5_000  # items the sessions view
CHECK_COUNTERS = 50
CHECK_CONTEXTS = 50
CHECK_PAGES = 200  # of PAGE_BYTES, a size the inputs were not measured at
CHECK_ROWS = 4_000  # 250 a schedule shard: past the listpack size, as a shop's
WITHIN = 0.20

INPUT_COLUMNS = ("input", "value", "unit", "how")
CHECK_COLUMNS = ("quantity", "predicted", "measured", "measured/predicted", "within 20 %")


def run(h: Harness, check: bool = False) -> list[Row]:
    """Measure the model's inputs; with ``check``, the model against a run."""
    processes = max(h.settings.processes)
    with single_server(h.server) as nodes, contextlib.ExitStack() as stack:
        workers = setup_workers((processes,))
        if workers is not None:
            stack.enter_context(contextlib.closing(workers))
        costs, mixed = _operation_costs(h, nodes, processes, workers, with_mix=check)
        inputs = costs | _memory_costs(h)
        checked = _check(h, mixed, inputs) if check else None  # adds mix_cpu_factor
        h.tables.append(_inputs_table(inputs, processes))
        if checked is not None:
            h.tables.append(checked)
    h.server.flush()
    return []


# -- inputs ------------------------------------------------------------------------------


def _operation_costs(
    h: Harness, nodes: Nodes, processes: int, workers: Workers | None, with_mix: bool
) -> tuple[dict[str, Any], list[RunFigures]]:
    """Each operation's costs, medians of ``repeat`` runs; with ``with_mix``,
    the shop's mixed page requests too, as runs. The workloads take turns
    run by run, so that a noisy neighbour falls on all of them alike, and on
    the mix as on the operations it is predicted from."""
    names = [*workloads.OPERATIONS, *([workloads.MIXED] if with_mix else [])]
    runs: dict[str, list[RunFigures]] = {name: [] for name in names}
    h.ticker.begin(
        f"{len(names)} workloads, {processes} process(es)", h.settings.repeat * len(names)
    )
    for round_number in range(h.settings.repeat):
        for name in names:
            h.say(f"{name}, {processes} process(es), run {round_number + 1}/{h.settings.repeat}")
            nodes.flush()
            figures = measure_run(
                workloads.WORKLOADS[name], nodes, processes, h.settings.seconds, workers
            )
            runs[name].append(figures)
            h.ticker.tick()
    costs: dict[str, dict[str, float]] = {"cpu_us": {}, "bytes_in": {}, "bytes_out": {}}
    for name in workloads.OPERATIONS:
        costs["cpu_us"][name] = statistics.median(r.cpu_us_per_op for r in runs[name])
        costs["bytes_in"][name] = statistics.median(r.bytes_in_per_op for r in runs[name])
        costs["bytes_out"][name] = statistics.median(r.bytes_out_per_op for r in runs[name])
    # The model adds the shop's page size to a page hit's reply.
    costs["bytes_out"][capacity.PAGE_HIT] -= workloads.PAGE_BYTES
    return costs, runs.get(workloads.MIXED, [])


def _per_item(h: Harness, name: str, load: Callable[[], object], count: Callable[[], int]) -> float:
    return h.memory(name, load, count, "bytes each").value


def _memory_costs(h: Harness) -> dict[str, Any]:
    url, size = h.server.url, h.settings.size
    sessions, counters, contexts = size(SESSIONS), size(COUNTERS), size(STATS_CONTEXTS)
    pages, rows, ranked = size(PAGES), size(ROWS), size(RANKED)
    page_bytes = [
        _per_item(
            h,
            f"cached page of {body:,} bytes",
            partial(loads.load_pages, url, pages, body),
            lambda: pages,
        )
        for body in PAGE_SIZES
    ]
    small, large = PAGE_SIZES
    per_body_byte = (page_bytes[1] - page_bytes[0]) / (large - small)
    found = {
        "session_bytes": _per_item(
            h,
            "session",
            partial(loads.load_sessions, url, sessions),
            partial(loads.count_sessions, url),
        ),
        "counter_sample_bytes": _per_item(
            h,
            "counter sample",
            partial(loads.load_counters, url, counters),
            partial(loads.count_counter_samples, url, counters),
        ),
        "stats_record_bytes": _per_item(
            h, "statistic, one period", partial(loads.load_stats, url, contexts), lambda: contexts
        ),
        "page_overhead_bytes": page_bytes[0] - small * per_body_byte,
        "page_body_factor": per_body_byte,
        "row_bytes": _per_item(h, "cached row", partial(loads.load_rows, url, rows), lambda: rows),
        "ranked_item_bytes": _per_item(
            h,
            "ranked item",
            partial(loads.load_ranking, url, ranked),
            partial(loads.count_ranked, url, ranked),
        ),
    }
    h.server.flush()
    return found


def _inputs_table(inputs: dict[str, Any], processes: int) -> Table:
    rows: list[tuple[str, str, str, str]] = []
    how = f"1 server, {processes} client processes, INFO cpu and stats deltas"
    for name in workloads.OPERATIONS:
        rows.append((f"{name}: server CPU", number(inputs["cpu_us"][name]), "µs/op", how))
        rows.append(
            (
                f"{name}: network",
                f"{number(inputs['bytes_in'][name])} in, {number(inputs['bytes_out'][name])} out",
                "bytes/op",
                how + ("; the page itself left out" if name == capacity.PAGE_HIT else ""),
            )
        )
    memory = {
        "session_bytes": "a session, 28 viewed items, a 3-line cart, its indexes",
        "counter_sample_bytes": "a counter sample (1,000 x 7 precisions x 120 a day apart)",
        "stats_record_bytes": f"a context's AccessTime for one period, {loads.STATS_VALUES} values",
        "page_overhead_bytes": "a cached page beyond its stored body (fit of two sizes)",
        "page_body_factor": "used_memory per stored body byte (fit of two sizes)",
        "row_bytes": "a scheduled, cached inventory row",
        "ranked_item_bytes": "an item in the view ranking",
    }
    for name, what in memory.items():
        rows.append((name, number(inputs[name]), "bytes", f"used_memory growth: {what}"))
    if "mix_cpu_factor" in inputs:
        how = "server CPU of the mixed page requests over their operations' summed"
        rows.append(("mix_cpu_factor", number(inputs["mix_cpu_factor"]), "ratio", how))
    return Table(
        "measured inputs of webtier.capacity",
        INPUT_COLUMNS,
        tuple(rows),
        (inputs,),
        frozenset({"value"}),
    )


# -- the check ---------------------------------------------------------------------------


def _check_shop(h: Harness) -> capacity.Shop:
    size = h.settings.size
    return capacity.Shop(
        hits_per_day=1e12,  # the ranking then holds every item viewed
        sessions=size(CHECK_SESSIONS),
        items=size(CHECK_ITEMS) + size(CHECK_PAGES),
        cached_pages=size(CHECK_PAGES),
        page_bytes=workloads.PAGE_BYTES,
        cached_rows=size(CHECK_ROWS),
        counters=size(CHECK_COUNTERS),
        stats_contexts=size(CHECK_CONTEXTS),
        stats_periods=1,
    )


def _load_sessions(tier: WebTier, sessions: int, items: int) -> None:
    """Full sessions as a shop makes them: 28 item pages viewed, 3 cart lines."""
    for n in range(sessions):
        token = tier.sessions.new(user=f"user:{n}")
        for k in range(loads.VIEWED_PER_SESSION):
            tier.sessions.touch(token, item=f"item:{(n * loads.VIEWED_PER_SESSION + k) % items}")
        for item, count in loads.CART:
            tier.carts.set(token, item, count)


def _load_counters(tier: WebTier, counters: int) -> None:
    now = time.time()
    for name in loads.counter_names(counters):
        for day in range(loads.COUNTER_SAMPLES):
            tier.counters.record(name, 1, now=now - day * capacity.DAY)


def _check(h: Harness, runs: list[RunFigures], inputs: dict[str, Any]) -> Table:
    shop = _check_shop(h)
    empty = replace(
        shop, sessions=0, items=0, cached_pages=0, cached_rows=0, counters=0, stats_contexts=0
    )
    h.server.flush()
    url = h.server.url
    # Each stage grows the shop by one capability; its predicted bytes are the
    # model's difference, its measured ones the used_memory difference.
    stages: list[tuple[str, capacity.Shop, Callable[[WebTier], object]]] = [
        (
            "sessions, their views and carts",
            replace(empty, sessions=shop.sessions, items=shop.items - shop.cached_pages),
            lambda t: _load_sessions(t, int(shop.sessions), int(shop.items - shop.cached_pages)),
        ),
        (
            "counters",
            replace(empty, counters=shop.counters),
            lambda t: _load_counters(t, int(shop.counters)),
        ),
        (
            "statistics",
            replace(empty, stats_contexts=shop.stats_contexts),
            lambda t: loads.load_stats(url, int(shop.stats_contexts)),
        ),
        (
            "cached pages and their views",
            replace(empty, cached_pages=shop.cached_pages, items=shop.cached_pages),
            lambda t: loads.cache_pages(t, range(int(shop.cached_pages)), workloads.PAGE_BYTES),
        ),
        (
            "cached rows",
            replace(empty, cached_rows=shop.cached_rows),
            lambda t: loads.load_rows(url, int(shop.cached_rows)),
        ),
    ]
    rows: list[tuple[str, str, str, str, str]] = []
    records: list[dict[str, Any]] = []

    def compare(
        what: str, predicted: float, measured: float, unit: str, judged: bool = True
    ) -> None:
        ratio = measured / predicted if predicted else float("nan")
        met = abs(ratio - 1) <= WITHIN if judged else None
        records.append(
            {"quantity": what, "unit": unit, "predicted": predicted, "measured": measured,
             "ratio": ratio, "within": met}
        )  # fmt: skip
        rows.append(
            (
                f"{what} ({unit})",
                number(predicted),
                number(measured),
                f"{ratio:.2f}",
                {True: "yes", False: "NO", None: "not judged"}[met],
            )
        )

    total_predicted = total_measured = 0.0
    with workloads.tier_on(url) as tier:
        for what, stage_shop, load in stages:
            h.say(f"check: loading {what}")
            before = h.settled_memory()
            load(tier)
            grown = h.settled_memory() - before
            predicted = sum(capacity.memory(stage_shop).values()) - sum(
                capacity.memory(empty).values()
            )
            compare(f"memory: {what}", predicted, grown, "bytes")
            total_predicted += predicted
            total_measured += grown
    compare("memory: the whole shop", total_predicted, total_measured, "bytes")
    h.server.flush()

    per_hit = workloads.MIXED_OPERATIONS_PER_HIT
    measured_cpu = statistics.median(r.cpu_us_per_op for r in runs) * per_hit
    mix_shop = capacity.Shop(page_bytes=workloads.PAGE_BYTES)
    compare("server CPU per page request", capacity.cpu_us_per_hit(mix_shop), measured_cpu, "µs")
    # This run's operations alone, summed: the mix's own factor, an input.
    alone = capacity.Costs(**{**_costs_fields(inputs), "mix_cpu_factor": 1.0, "source": "this run"})
    summed = capacity.cpu_us_per_hit(mix_shop, alone)
    compare(
        "server CPU per page request, this run's operations alone, summed",
        summed,
        measured_cpu,
        "µs",
        judged=False,  # what the mix's factor is measured from
    )
    inputs["mix_cpu_factor"] = measured_cpu / summed
    sizing = capacity.size(mix_shop)
    measured_out = statistics.median(r.bytes_out_per_op for r in runs) * per_hit
    measured_in = statistics.median(r.bytes_in_per_op for r in runs) * per_hit
    compare(
        "network in per page request",
        sizing.network_in_per_s / sizing.peak_hits_per_s,
        measured_in,
        "bytes",
    )
    compare(
        "network out per page request",
        sizing.network_out_per_s / sizing.peak_hits_per_s,
        measured_out,
        "bytes",
    )
    return Table(
        "the model against a run of a small shop",
        CHECK_COLUMNS,
        tuple(rows),
        tuple(records),
        frozenset(CHECK_COLUMNS[1:4]),
    )


def _costs_fields(inputs: dict[str, Any]) -> dict[str, Any]:
    """This run's inputs as :class:`webtier.capacity.Costs` fields (the
    worker rates, not measured here, from the model's constants)."""
    fields = {name: inputs[name] for name in capacity.Costs.__dataclass_fields__ if name in inputs}
    for name in ("sessions_cleaned_per_s", "counters_cleaned_per_s", "rows_refreshed_per_s"):
        fields[name] = getattr(capacity.MEASURED, name)
    return fields
