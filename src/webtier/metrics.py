"""webtier's data as Prometheus / OpenMetrics metrics (``webtier[metrics]``).

webtier's counters, statistics and session figures are already aggregated
across every process in Redis, so a scrape reads them from there: no
multiprocess files, no per-process registries. :class:`Collector` is a
``prometheus_client`` custom collector over a sync tier (register it, or let
:func:`exposition` print it); :func:`asgi_app` serves ``/metrics`` from an
asyncio tier without blocking its loop. Both read one :class:`Snapshot`,
which costs a fixed number of round trips whatever the number of counters.

Families (base units, bounded labels):

- ``webtier_counts_total{counter}``: every sample the coarsest precision
  keeps; ``webtier_counts_last_slice{counter}``: the chosen precision's
  latest complete slice. At most ``max_counters`` counters, in name order.
  (Not ``webtier_counter_*``: a metric's name never holds its type.)
- ``webtier_access_time_seconds{context}``: a histogram of the
  ``AccessTime`` statistics of the newest ``periods`` periods (contexts are
  route templates, bounded by ``max_contexts``), on power-of-two buckets,
  which are exact boundaries of webtier's log histograms, the same series
  in both formats; and ``webtier_access_time_percentile_seconds{context,
  percentile}`` (``quantile`` is a summary's label only).
- ``webtier_sessions``, ``webtier_sessions_limit``,
  ``webtier_sessions_oldest_age_seconds``, ``webtier_sessions_cleaned_total``.
- ``webtier_pagecache_requests_total{outcome}``, ``webtier_pagecache_renders_total``.
- ``webtier_rows_{scheduled,due,loading}{source}``, ``webtier_rows_refresh_lag_seconds{source}``.
- ``webtier_workers_alive``, ``webtier_worker_heartbeat_age_seconds{worker,host}``.
- ``webtier_item_views{item}``: the ``top_items`` most viewed items.
- ``webtier_up``: 0 when Redis could not be read (the rest is then absent).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from webtier import overview
from webtier._core.deadline import time_limit
from webtier._core.extras import extra_needed
from webtier._core.protocol import Op
from webtier.config import Config
from webtier.errors import WebtierError
from webtier.types import RowStatus, Summary

with extra_needed("metrics", "the metrics exposition"):
    from prometheus_client import exposition
    from prometheus_client.metrics_core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import Collector as _Collector
    from prometheus_client.registry import CollectorRegistry

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from webtier.aio import WebTier as AsyncWebTier
    from webtier.sync import WebTier

# Bucket bounds, in seconds: powers of two from ~61 us to 64 s. Each is a
# boundary of the log histograms' buckets, so the cumulative counts are exact.
BUCKETS = tuple(2.0**k for k in range(-14, 7))
QUANTILES = (50.0, 95.0, 99.0)


@dataclass(frozen=True, slots=True)
class Settings:
    """What a scrape reads."""

    precision: int = 60  # seconds: the counters' slices reported as last_slice
    periods: int = 1  # statistics periods merged (1: the current one)
    max_counters: int = 1000  # counters exposed, in name order
    max_contexts: int = 200  # statistics contexts exposed, slowest first
    top_items: int = 10  # most viewed items exposed
    # Seconds the ASGI app's scrape may wait for Redis, its tries included
    # (as the web middlewares' budget): a hung server answers webtier_up 0
    # well within Prometheus's scrape timeout, not after the client's socket
    # timeouts and retries (15 s and more).
    time_limit: float | None = 1.0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one scrape reports, read at ``now`` (epoch seconds)."""

    now: float
    precision: int
    last: overview.CounterPage  # at the chosen precision
    totals: overview.CounterPage  # at the coarsest precision
    stats: list[Summary]
    health: overview.Health


def read_snapshot(cfg: Config, settings: Settings) -> Op[Snapshot]:
    """The operation behind a scrape: a fixed number of steps."""
    own = [*overview.PAGECACHE_COUNTERS.values(), overview.SESSIONS_CLEANED]
    last = yield from overview.read_counter_page(
        cfg, settings.precision, limit=settings.max_counters
    )
    names = list(dict.fromkeys([*last.series, *own]))
    totals = yield from overview.read_counter_page(
        cfg, cfg.counters.seconds[-1], names=names, limit=len(names)
    )
    summaries = yield from overview.read_stats(cfg, settings.periods, limit=settings.max_contexts)
    health = yield from overview.read_health(cfg, top=settings.top_items)
    return Snapshot(cfg.clock.wall(), settings.precision, last, totals, summaries, health)


# -- families ------------------------------------------------------------------------------


def _last_complete(samples: list[tuple[int, int]], precision: int, now: float) -> int:
    complete = [count for start, count in samples if start + precision <= now]
    return complete[-1] if complete else 0


def _histogram(summary: Summary) -> list[tuple[str, float]]:
    bins = summary.histogram.bins() if summary.histogram is not None else []
    buckets = []
    for bound in BUCKETS:
        below = sum(count for _, upper, count in bins if upper <= bound)
        buckets.append((repr(bound), float(below)))
    buckets.append(("+Inf", float(summary.count)))
    return buckets


def _counter_families(snapshot: Snapshot) -> Iterator[Metric]:
    totals = CounterMetricFamily(
        "webtier_counts",
        "Counts a webtier counter still holds at its coarsest precision.",
        labels=["counter"],
    )
    last = GaugeMetricFamily(
        "webtier_counts_last_slice",
        f"Count of a webtier counter in its latest complete {snapshot.precision} s slice.",
        labels=["counter"],
    )
    total_of = {name: sum(c for _, c in s) for name, s in snapshot.totals.series.items()}
    for name, samples in snapshot.last.series.items():
        totals.add_metric([name], total_of.get(name, 0))
        last.add_metric([name], _last_complete(samples, snapshot.precision, snapshot.now))
    yield totals
    yield last
    requests = CounterMetricFamily(
        "webtier_pagecache_requests",
        "Requests the page cache answered, by outcome.",
        labels=["outcome"],
    )
    for outcome, name in overview.PAGECACHE_COUNTERS.items():
        if outcome != "render":
            requests.add_metric([outcome], total_of.get(name, 0))
    yield requests
    yield CounterMetricFamily(
        "webtier_pagecache_renders",
        "Pages the application rendered behind the page cache.",
        value=total_of.get(overview.PAGECACHE_COUNTERS["render"], 0),
    )
    yield CounterMetricFamily(
        "webtier_sessions_cleaned",
        "Sessions the cleaner removed.",
        value=total_of.get(overview.SESSIONS_CLEANED, 0),
    )


def _stats_families(snapshot: Snapshot) -> Iterator[Metric]:
    # A histogram, not a gauge histogram: the classic text format has no
    # gauge histogram (prometheus_client writes its buckets alone there, its
    # _gcount and _gsum as unrelated gauges) and promtool reads none. The
    # counts of a period only grow, and restart with the next period: the
    # reset rate() expects of a counter (docs/metrics.md).
    histogram = HistogramMetricFamily(
        "webtier_access_time_seconds",
        "Request durations of the current statistics period(s), by route template.",
        labels=["context"],
    )
    percentiles = GaugeMetricFamily(
        "webtier_access_time_percentile_seconds",
        "Percentiles of the request durations, within the histograms' relative error.",
        labels=["context", "percentile"],
    )
    for summary in snapshot.stats:
        histogram.add_metric([summary.context], _histogram(summary), summary.sum)
        for percent in QUANTILES:
            value = summary.percentile(percent)
            if value is not None:
                percentiles.add_metric([summary.context, f"{percent:g}"], value)
    yield histogram
    yield percentiles


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _health_families(snapshot: Snapshot) -> Iterator[Metric]:
    health, now = snapshot.health, snapshot.now
    sessions = health.sessions
    yield _gauge("webtier_sessions", "Sessions the recency indexes list.", sessions.sessions)
    yield _gauge("webtier_sessions_limit", "The cap the cleaner keeps.", health.session_limit)
    oldest = 0.0 if sessions.oldest is None else max(0.0, now - sessions.oldest)
    yield _gauge(
        "webtier_sessions_oldest_age_seconds", "Seconds since the least recent session.", oldest
    )
    per_source: dict[str, Callable[[RowStatus], float]] = {
        "scheduled": lambda s: s.scheduled,
        "due": lambda s: s.due,
        "loading": lambda s: s.loading,
        "refresh_lag_seconds": lambda s: s.overdue,
    }
    for field, value_of in per_source.items():
        family = GaugeMetricFamily(
            f"webtier_rows_{field}", f"Row cache: {field.replace('_', ' ')}.", labels=["source"]
        )
        for source, status in health.rows.items():
            family.add_metric([source], value_of(status))
        yield family
    yield _gauge("webtier_workers_alive", "Workers whose liveness key lives.", len(health.workers))
    beats = GaugeMetricFamily(
        "webtier_worker_heartbeat_age_seconds",
        "Seconds since each live worker's last heartbeat.",
        labels=["worker", "host"],
    )
    for worker in health.workers:
        beats.add_metric([worker.id, worker.host], max(0.0, now - worker.beat))
    yield beats
    views = GaugeMetricFamily(
        "webtier_item_views", "Views of the most viewed items (rescaled).", labels=["item"]
    )
    for item, count in health.top_items:
        views.add_metric([item], count)
    yield views


def families(snapshot: Snapshot | None) -> Iterator[Metric]:
    """The metric families of a snapshot (``None``: Redis could not be read)."""
    up = 0.0 if snapshot is None else 1.0
    yield _gauge("webtier_up", "1 when webtier's data could be read from Redis.", up)
    if snapshot is None:
        return
    yield from _counter_families(snapshot)
    yield from _stats_families(snapshot)
    yield from _health_families(snapshot)


class _Fixed(_Collector):
    def __init__(self, snapshot: Snapshot | None) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterable[Metric]:
        return families(self.snapshot)


class Collector(_Collector):
    """A ``prometheus_client`` collector reading a sync tier at each scrape:
    ``REGISTRY.register(Collector(tier))``."""

    def __init__(self, tier: WebTier, settings: Settings | None = None) -> None:
        self.tier, self.settings = tier, settings or Settings()

    def describe(self) -> Iterable[Metric]:
        """Nothing up front: registering must not read Redis (without this,
        prometheus_client would collect once to learn the names)."""
        return ()

    def collect(self) -> Iterable[Metric]:
        try:
            snapshot = self.tier.transport.run(read_snapshot(self.tier.config, self.settings))
        except WebtierError:
            snapshot = None
        return families(snapshot)


def exposition_of(snapshot: Snapshot | None, accept: str = "") -> tuple[bytes, str]:
    """The exposition of a snapshot in the format ``accept`` asks for
    (OpenMetrics when it names it, Prometheus text otherwise), and its
    content type."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(snapshot))
    encode, content_type = exposition.choose_encoder(accept)
    return encode(registry), content_type


async def read_async(tier: AsyncWebTier, settings: Settings) -> Snapshot | None:
    """A snapshot from an asyncio tier, ``None`` when Redis could not be
    read within ``settings.time_limit``."""
    try:
        with time_limit(settings.time_limit):
            snapshot: Snapshot = await tier.transport.run(read_snapshot(tier.config, settings))
    except WebtierError:
        return None
    return snapshot


class MetricsApp:
    """An ASGI app answering every HTTP request with the exposition of an
    asyncio tier. An instance, not a function, so that Starlette's
    ``Route("/metrics", MetricsApp(tier))`` serves it as it is."""

    def __init__(self, tier: AsyncWebTier, settings: Settings | None = None) -> None:
        self.tier, self.settings = tier, settings or Settings()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        snapshot = await read_async(self.tier, self.settings)
        body, content_type = exposition_of(snapshot, headers.get("accept", ""))
        head = [(b"content-type", content_type.encode()), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": body})


def asgi_app(tier: AsyncWebTier, settings: Settings | None = None) -> MetricsApp:
    """The exposition of ``tier`` as an ASGI app: ``Route("/metrics",
    asgi_app(tier))`` in a Starlette app, or ``app.mount("/metrics", ...)``."""
    return MetricsApp(tier, settings)
