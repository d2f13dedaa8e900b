"""``webtier size``: what Redis a shop of a given size needs, from the
capacity model (:mod:`webtier.capacity`) and its measured costs. Talks to no
server; the defaults are the book's shop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from webtier import capacity
from webtier.cli.output import json_option, print_json, print_table
from webtier.cli.shared import FiniteFloat

F = TypeVar("F", bound=Callable[..., Any])

_DEFAULTS = capacity.Shop()
_COUNT = FiniteFloat(min=0)
_POSITIVE = FiniteFloat(min=0, min_open=True)


def _bytes(value: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value:,.0f} B"


def _rate(value: float) -> str:
    return f"{value:,.0f}/s" if value >= 10 else f"{value:.2g}/s"


def _document(sizing: capacity.Sizing) -> dict[str, Any]:
    shop = sizing.shop
    return {
        "shop": {
            "hits_per_day": shop.hits_per_day,
            "users": shop.users,
            "sessions": shop.sessions,
            "items": shop.items,
            "cached_pages": shop.cached_pages,
            "page_bytes": shop.page_bytes,
            "cached_rows": shop.cached_rows,
            "row_refresh_seconds": shop.row_refresh_s,
            "counters": shop.counters,
            "stats_contexts": shop.stats_contexts,
            "peak_factor": shop.peak_factor,
            "headroom": shop.headroom,
            "master_memory_bytes": shop.master_memory,
            "ranking_shards": shop.ranking_shards,
            "operations_per_hit": dict(shop.mix),
        },
        "peak_hits_per_second": sizing.peak_hits_per_s,
        "memory_bytes": dict(sizing.memory_bytes),
        "memory_total_bytes": sizing.memory_total,
        "cpu_us_per_hit": sizing.cpu_us_per_hit,
        "cpu_cores_at_peak": sizing.cpu_cores_at_peak,
        "ranking_cores_per_shard": sizing.ranking_cores_per_shard,
        "masters": sizing.masters,
        "masters_for_cpu": sizing.masters_for_cpu,
        "masters_for_memory": sizing.masters_for_memory,
        "workers": [
            {
                "job": w.job,
                "needed_per_second": w.needed_per_s,
                "one_process_per_second": w.one_process_per_s,
                "processes": w.processes,
            }
            for w in sizing.workers
        ],
        "network_in_bytes_per_second": sizing.network_in_per_s,
        "network_out_bytes_per_second": sizing.network_out_per_s,
        "costs_source": capacity.MEASURED.source,
    }


def _print(sizing: capacity.Sizing) -> None:
    shop = sizing.shop
    click.echo(
        f"{shop.hits_per_day:,.0f} hits a day: {shop.average_hits_per_s:,.0f}/s on average, "
        f"{sizing.peak_hits_per_s:,.0f}/s at peak (x{shop.peak_factor:.2f})"
    )
    total = sizing.memory_total or 1
    memory = [
        (name, _bytes(used), f"{used / total:.0%}") for name, used in sizing.memory_bytes.items()
    ]
    memory.append(("all", _bytes(sizing.memory_total), "100%"))
    print_table(
        ("capability", "used_memory", "share"),
        memory,
        title="memory",
        right=("used_memory", "share"),
    )
    click.echo(
        f"server CPU at peak: {sizing.cpu_us_per_hit:.0f} µs a hit, "
        f"{sizing.cpu_cores_at_peak:.2f} cores"
    )
    hot = sizing.ranking_cores_per_shard
    click.echo(
        f"view ranking: {hot:.2f} cores on the master of each of its {shop.ranking_shards} "
        "shard(s)"
        + (
            f"; above {shop.headroom:.0%} of a core: more shards (--ranking-shards) are needed"
            if hot > shop.headroom
            else ""
        )
    )
    click.echo(
        f"masters: {sizing.masters} ({sizing.masters_for_cpu} for CPU at {shop.headroom:.0%} "
        f"of a core, {sizing.masters_for_memory} for memory at {_bytes(shop.master_memory)} "
        "each" + ("; a Cluster has 3 at least)" if sizing.masters > 1 else ")")
    )
    print_table(
        ("job", "needed at peak", "one process", "processes"),
        [
            (w.job, _rate(w.needed_per_s), _rate(w.one_process_per_s), w.processes)
            for w in sizing.workers
        ],
        title="workers",
        right=("needed at peak", "one process", "processes"),
    )
    click.echo(
        f"network at peak: {_bytes(sizing.network_in_per_s)}/s in, "
        f"{_bytes(sizing.network_out_per_s)}/s out"
    )
    click.echo(f"costs: {capacity.MEASURED.source} (docs/capacity.md)")


def _option(name: str, kind: click.ParamType[Any], default: float, help: str) -> Callable[[F], F]:
    return click.option(name, type=kind, default=default, show_default=True, help=help)


@click.command()
@_option("--hits-per-day", _COUNT, _DEFAULTS.hits_per_day, "Page requests a day.")
@_option("--users", _COUNT, _DEFAULTS.users, "Distinct users a day (one new session each).")
@_option("--sessions", _COUNT, _DEFAULTS.sessions, "Sessions kept.")
@_option("--items", _COUNT, _DEFAULTS.items, "Items in the catalogue.")
@_option("--cached-pages", _COUNT, _DEFAULTS.cached_pages, "Pages in the page cache.")
@_option("--page-bytes", _COUNT, _DEFAULTS.page_bytes, "A cached page as stored (gzipped).")
@_option("--cached-rows", _COUNT, _DEFAULTS.cached_rows, "Rows in the row cache.")
@click.option(
    "--row-refresh", "row_refresh_s", type=_POSITIVE, default=_DEFAULTS.row_refresh_s,
    show_default=True, help="Seconds between refreshes of a row.",
)  # fmt: skip
@_option("--counters", _COUNT, _DEFAULTS.counters, "Counter names.")
@_option("--stats-contexts", _COUNT, _DEFAULTS.stats_contexts, "Timed contexts (pages).")
@_option("--peak-factor", FiniteFloat(min=1), _DEFAULTS.peak_factor, "Peak rate / average rate.")
@_option(
    "--headroom", FiniteFloat(min=0, max=1, min_open=True), _DEFAULTS.headroom,
    "Share of a master's core to use at peak.",
)  # fmt: skip
@_option(
    "--master-memory", _POSITIVE, _DEFAULTS.master_memory / capacity.GIB,
    "GiB of used_memory one master may hold.",
)  # fmt: skip
@click.option(
    "--ranking-shards", type=click.IntRange(min=1, max=16384), default=_DEFAULTS.ranking_shards,
    show_default=True, help="Sorted sets the view ranking is split over.",
)  # fmt: skip
@json_option
def size(as_json: bool, master_memory: float, **shop: Any) -> None:
    """What Redis a shop needs: memory, server CPU, masters, workers, network.

    From webtier's capacity model and the costs measured by webtier bench
    capacity; the defaults are the book's shop (docs/capacity.md)."""
    # Every other option is named as the Shop field it sets.
    sizing = capacity.size(capacity.Shop(**shop, master_memory=master_memory * capacity.GIB))
    if as_json:
        print_json(_document(sizing))
    else:
        _print(sizing)
