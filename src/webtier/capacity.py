"""How much Redis a shop needs: memory, server CPU, Cluster masters,
maintenance workers and network, from a shop's size and measured costs.

A pure model (no I/O): :func:`size` of a :class:`Shop` with :class:`Costs`.
The default shop is the book's (*Redis in Action* 2.1: 100 million hits a
day from 5 million users, 10 million sessions, 6,000 writes/s at peak); the
default costs, :data:`MEASURED`, were measured on a real server by
``webtier bench capacity`` (``benchmarks/capacity.py``), and
``docs/capacity.md`` says where each comes from and checks the model
against a measured run. ``webtier size`` prints it.

What the model assumes, so that its answers can be judged:

* every hit makes the operations of :attr:`Shop.mix` (by default those of a
  shop's page request: check and touch the session with the viewed item,
  read the item's row, serve its cached page, count the page and time it,
  and a cart change every tenth hit); the peak is ``peak_factor`` times the
  day's average rate;
* server CPU per operation is that of a busy server (several clients
  pipelining nothing, each waiting for its reply): an idle server spends
  more per operation, on its own event-loop wake-ups;
* memory is Redis's ``used_memory`` of full data sets: every session with its
  viewed items (25, and up to 3 more between trims) and a 3-line cart, every
  counter with all its samples, every statistic for all its periods; plan
  ``maxmemory`` with room for fragmentation and for copies made on a fork;
* a master can use ``headroom`` of one core at peak (Redis runs commands on
  one thread), and holds at most ``master_memory`` bytes;
* every view of an item goes to one of ``ranking_shards`` sorted sets, priced
  as a separate ``item view`` (on a Cluster, the touch sends it apart): the
  master of a shard must keep up with its part of the views.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from types import MappingProxyType
from typing import Any

from webtier.config import CounterSettings, RankingSettings, StatsSettings
from webtier.errors import ConfigError

GIB = 2**30
DAY = 86_400

# The hot operation of each capability, as the benchmarks name them.
CHECK = "sessions check"
TOUCH = "sessions touch, with an item"
CART_SET = "cart set"
COUNTER_RECORD = "counter record"
STATS_RECORD = "stats record"
PAGE_HIT = "page-cache hit"
ROW_READ = "row read"
ITEM_VIEW = "item view"
OPERATIONS = (CHECK, TOUCH, CART_SET, COUNTER_RECORD, STATS_RECORD, PAGE_HIT, ROW_READ, ITEM_VIEW)

# A page request of a shop (the mixed workload of ``webtier bench cluster``):
# operations per hit. The item view is counted by the touch.
SHOP_MIX: Mapping[str, float] = MappingProxyType(
    {
        CHECK: 1,
        TOUCH: 1,
        ROW_READ: 1,
        PAGE_HIT: 1,
        COUNTER_RECORD: 1,
        STATS_RECORD: 1,
        CART_SET: 0.1,
    }
)

# The book's peak: 6,000 session writes/s when 100 million hits a day
# average 1,157/s (the book rounds the average to 1,200).
BOOK_PEAK_FACTOR = 6_000 / (100e6 / DAY)


def _frozen(mapping: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class Costs:
    """Measured costs: what each operation and each stored thing takes."""

    cpu_us: Mapping[str, float]  # server CPU µs per operation (user + system)
    bytes_in: Mapping[str, float]  # request bytes per operation, client to server
    bytes_out: Mapping[str, float]  # reply bytes per operation (a page hit's without the page)
    session_bytes: float  # a session, its 28 viewed items, a 3-line cart, its indexes
    counter_sample_bytes: float  # one retained (counter, precision, slice) sample
    stats_record_bytes: float  # one (context, type) for one period, with its histogram
    page_overhead_bytes: float  # a cached page beyond its stored (gzipped) body
    page_body_factor: float  # used_memory per stored body byte (the allocator rounds up)
    row_bytes: float  # a cached row (the demo shop's inventory row) and its schedule entry
    ranked_item_bytes: float  # one item in the view ranking
    sessions_cleaned_per_s: float  # by one cleaner process
    counters_cleaned_per_s: float  # visited by one counter cleaner's pass
    rows_refreshed_per_s: float  # reloaded by one row refresher (from PostgreSQL)
    # Server CPU of a shop's mixed page requests over the sum of their
    # operations measured alone: the mix costs more (see docs/capacity.md).
    mix_cpu_factor: float = 1.0
    source: str = ""  # where and how these were measured

    def __post_init__(self) -> None:
        for name in ("cpu_us", "bytes_in", "bytes_out"):
            table: Mapping[str, float] = getattr(self, name)
            missing = set(OPERATIONS) - set(table)
            if missing:
                raise ConfigError(f"costs.{name} lacks {', '.join(sorted(missing))}")
            object.__setattr__(self, name, _frozen(table))


# Measured by `webtier bench capacity --check` of 2026-11-25 on a 2-core AMD
# EPYC VM shared with other work, Redis 7.0.15, redis-py 8.1 with hiredis,
# 4 client processes (docs/capacity.md has its tables); row_bytes by the
# run after it, which measured rows in their steady state (scheduled and
# refreshed, 5,000 of them: past the schedule's listpack size). The cleanup
# and refresh rates are those of `webtier bench sessions`, `counters` and
# `rowcache` in docs/benchmarks.md, on the same machine.
MEASURED = Costs(
    cpu_us={
        CHECK: 9.34,
        TOUCH: 22.7,
        CART_SET: 13.1,
        COUNTER_RECORD: 16.6,
        STATS_RECORD: 19.4,
        PAGE_HIT: 11.3,
        ROW_READ: 9.42,
        ITEM_VIEW: 8.51,
    },
    bytes_in={
        CHECK: 88,
        TOUCH: 349,
        CART_SET: 169,
        COUNTER_RECORD: 655,
        STATS_RECORD: 306,
        PAGE_HIT: 73,
        ROW_READ: 50,
        ITEM_VIEW: 65,
    },
    bytes_out={
        CHECK: 14,
        TOUCH: 47,
        CART_SET: 9,
        COUNTER_RECORD: 4,
        STATS_RECORD: 66,
        PAGE_HIT: 148,
        ROW_READ: 71,
        ITEM_VIEW: 5,
    },
    session_bytes=1_039,
    counter_sample_bytes=9.92,
    stats_record_bytes=1_123,
    page_overhead_bytes=998,
    page_body_factor=1.0,
    row_bytes=325,
    ranked_item_bytes=121,
    sessions_cleaned_per_s=257_524,
    counters_cleaned_per_s=35_565,
    rows_refreshed_per_s=24_607,
    mix_cpu_factor=1.22,
    source="webtier bench capacity, 2026-11-25, 2-core AMD EPYC VM, Redis 7.0.15",
)


@dataclass(frozen=True, slots=True)
class Shop:
    """A shop's size and load; the defaults are the book's shop."""

    hits_per_day: float = 100e6
    users: float = 5e6  # distinct users a day, each starting one session a day
    sessions: float = 10e6  # sessions kept
    items: float = 1e6  # items in the catalogue (the ranking keeps the viewed ones)
    cached_pages: float = 10_000  # the book caches the 10,000 most viewed items' pages
    page_bytes: float = 10_000  # a cached page as stored: gzipped when that pays
    cached_rows: float = 100_000  # the book's 100,000 items for sale
    row_refresh_s: float = 60.0  # each cached row reloaded this often
    counters: float = 1_000  # counter names (each at every precision)
    stats_contexts: float = 1_000  # timed contexts (pages), one type each
    stats_periods: float = StatsSettings().keep + 1  # periods kept: the current one and 24 more
    peak_factor: float = BOOK_PEAK_FACTOR  # peak rate over the day's average
    headroom: float = 0.75  # share of a master's core to use at peak
    master_memory: float = 25 * GIB  # most used_memory one master may hold
    # Sorted sets the view ranking is split over (1: the book's single key,
    # which takes every view on one master whatever the Cluster's size).
    ranking_shards: int = 1
    mix: Mapping[str, float] = field(default_factory=lambda: SHOP_MIX)

    def __post_init__(self) -> None:
        for name in (
            "hits_per_day", "users", "sessions", "items", "cached_pages", "page_bytes",
            "cached_rows", "counters", "stats_contexts", "stats_periods",
        ):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a number >= 0, not {value!r}")
        for name in ("row_refresh_s", "peak_factor", "master_memory"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name} must be a number > 0, not {value!r}")
        if not isinstance(self.ranking_shards, int) or self.ranking_shards < 1:
            raise ConfigError(f"ranking_shards must be an int >= 1, not {self.ranking_shards!r}")
        if not 0 < self.headroom <= 1:
            raise ConfigError(f"headroom must be in (0, 1], not {self.headroom!r}")
        if self.peak_factor < 1:
            raise ConfigError(f"peak_factor must be >= 1, not {self.peak_factor!r}")
        unknown = set(self.mix) - set(OPERATIONS)
        if unknown:
            raise ConfigError(f"mix names unknown operations: {', '.join(sorted(unknown))}")
        if any(count < 0 for count in self.mix.values()):
            raise ConfigError("mix counts must be >= 0")
        object.__setattr__(self, "mix", _frozen(self.mix))

    @property
    def average_hits_per_s(self) -> float:
        return self.hits_per_day / DAY

    @property
    def peak_hits_per_s(self) -> float:
        return self.average_hits_per_s * self.peak_factor


@dataclass(frozen=True, slots=True)
class Worker:
    """A maintenance job: the rate it must keep up with at peak, what one
    process does, and how many processes that takes (at least one)."""

    job: str
    needed_per_s: float
    one_process_per_s: float
    processes: int


@dataclass(frozen=True, slots=True)
class Sizing:
    """What a shop needs; bytes are Redis's ``used_memory``."""

    shop: Shop
    peak_hits_per_s: float
    memory_bytes: Mapping[str, float]  # by capability
    cpu_cores_at_peak: float  # server CPU seconds per second, all masters
    cpu_us_per_hit: float
    # The view ranking's writes on the master of its busiest shard, in cores:
    # above the headroom, no number of masters is enough without more shards.
    ranking_cores_per_shard: float
    masters: int  # Cluster masters (1: one server is enough)
    masters_for_cpu: int
    masters_for_memory: int
    workers: tuple[Worker, ...]
    network_in_per_s: float  # bytes/s into the servers at peak
    network_out_per_s: float  # bytes/s out of the servers at peak

    @property
    def memory_total(self) -> float:
        return sum(self.memory_bytes.values())

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for JSON."""
        shop = {f.name: getattr(self.shop, f.name) for f in fields(self.shop)}
        found = {f.name: getattr(self, f.name) for f in fields(self)}
        return found | {
            "shop": shop | {"mix": dict(self.shop.mix)},
            "memory_bytes": dict(self.memory_bytes),
            "memory_total": self.memory_total,
            "workers": [asdict(worker) for worker in self.workers],
        }


def memory(shop: Shop, costs: Costs = MEASURED) -> dict[str, float]:
    """used_memory of each capability's data, in bytes."""
    counter_samples = sum(p.samples for p in CounterSettings().precisions)
    ranking = RankingSettings()
    # Between two rescales the ranking holds the kept items and any other
    # item viewed since: at most the catalogue, at most the views made.
    views_per_period = shop.average_hits_per_s * ranking.interval * _views_per_hit(shop)
    ranked = min(shop.items, ranking.keep + views_per_period)
    return {
        "sessions": shop.sessions * costs.session_bytes,
        "counters": shop.counters * counter_samples * costs.counter_sample_bytes,
        "stats": shop.stats_contexts * shop.stats_periods * costs.stats_record_bytes,
        "page cache": shop.cached_pages
        * (costs.page_overhead_bytes + shop.page_bytes * costs.page_body_factor),
        "row cache": shop.cached_rows * costs.row_bytes,
        "view ranking": ranked * costs.ranked_item_bytes,
    }


def _views_per_hit(shop: Shop) -> float:
    return shop.mix.get(TOUCH, 0) + shop.mix.get(ITEM_VIEW, 0)


def cpu_us_per_hit(shop: Shop, costs: Costs = MEASURED, *, cluster: bool = False) -> float:
    """Server CPU µs one hit costs, all its operations together. On a
    Cluster the touch's view goes to the ranking's master in a request of
    its own (on one server the session script counts it): one item view more."""
    operations = sum(count * costs.cpu_us[op] for op, count in shop.mix.items())
    if cluster:
        operations += shop.mix.get(TOUCH, 0) * costs.cpu_us[ITEM_VIEW]
    return operations * costs.mix_cpu_factor


def workers(shop: Shop, costs: Costs = MEASURED) -> tuple[Worker, ...]:
    """The maintenance processes each job needs at peak."""
    counters = CounterSettings()
    jobs = (
        # Sessions leave as fast as they arrive: each user starts one a day.
        ("session cleaner", shop.users / DAY * shop.peak_factor, costs.sessions_cleaned_per_s),
        # Every counter is visited once a pass (precisions not due are skipped).
        ("counter cleaner", shop.counters / counters.clean_interval, costs.counters_cleaned_per_s),
        ("row refresher", shop.cached_rows / shop.row_refresh_s, costs.rows_refreshed_per_s),
    )
    found = [
        Worker(job, needed, one, max(1, math.ceil(needed / (one * shop.headroom))))
        for job, needed, one in jobs
    ]
    # The rescale runs once a period whoever runs it: one process.
    found.append(Worker("ranking rescaler", 1 / RankingSettings().interval, 1.0, 1))
    return tuple(found)


def size(shop: Shop | None = None, costs: Costs = MEASURED) -> Sizing:
    """Memory, server CPU, masters, workers and network for ``shop``."""
    shop = shop or Shop()
    peak = shop.peak_hits_per_s
    used = memory(shop, costs)
    for_memory = max(1, math.ceil(sum(used.values()) / shop.master_memory))
    per_hit = cpu_us_per_hit(shop, costs)
    for_cpu = max(1, math.ceil(peak * per_hit / 1e6 / shop.headroom))
    if max(for_cpu, for_memory) > 1:  # a Cluster: priced as one
        per_hit = cpu_us_per_hit(shop, costs, cluster=True)
        for_cpu = max(1, math.ceil(peak * per_hit / 1e6 / shop.headroom))
    cores = peak * per_hit / 1e6
    masters = max(for_cpu, for_memory)
    if masters > 1:
        masters = max(masters, 3)  # Redis Cluster's least
    bytes_in = sum(count * costs.bytes_in[op] for op, count in shop.mix.items())
    bytes_out = sum(count * costs.bytes_out[op] for op, count in shop.mix.items())
    bytes_out += shop.mix.get(PAGE_HIT, 0) * shop.page_bytes
    views_per_s = peak * _views_per_hit(shop)
    ranking_cores = views_per_s * costs.cpu_us[ITEM_VIEW] / 1e6 / shop.ranking_shards
    return Sizing(
        shop=shop,
        peak_hits_per_s=peak,
        memory_bytes=_frozen(used),
        cpu_cores_at_peak=cores,
        cpu_us_per_hit=per_hit,
        ranking_cores_per_shard=ranking_cores,
        masters=masters,
        masters_for_cpu=for_cpu,
        masters_for_memory=for_memory,
        workers=workers(shop, costs),
        network_in_per_s=peak * bytes_in,
        network_out_per_s=peak * bytes_out,
    )
