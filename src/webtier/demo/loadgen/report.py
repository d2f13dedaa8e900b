"""What a load run saw: a :class:`Recorder` while it runs (memory bounded:
latencies go into log-linear histogram buckets, never a list), a frozen
:class:`LoadReport` at the end, shown as a table or a JSON document."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from webtier.config import StatsSettings
from webtier.stats.histogram import Histogram, bucket_of

if TYPE_CHECKING:
    from rich.table import Table

# Latency percentiles within 1 % of the true value.
SUB_BUCKETS = StatsSettings(relative_error=0.01).sub_buckets
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx")
# Order ids kept for checking (the count goes on beyond).
ORDER_IDS_KEPT = 100_000

_TEMPLATES = (
    (re.compile(r"/item/[^/]+"), "/item/{item_id}"),
    (re.compile(r"/orders/[^/]+"), "/orders/{order_id}"),
)


def route_of(method: str, path: str) -> str:
    """``GET /item/{item_id}`` for ``GET /item/42``: the shop's route
    templates, so that figures are per page, not per URL."""
    path = path.split("?", 1)[0]
    for pattern, template in _TEMPLATES:
        if pattern.fullmatch(path):
            return f"{method} {template}"
    return f"{method} {path}"


@dataclass(slots=True)
class _Route:
    statuses: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUS_CLASSES, 0))
    codes: dict[int, int] = field(default_factory=dict)
    transport_errors: int = 0
    buckets: dict[str, int] = field(default_factory=dict)
    slowest: float = 0.0


class Recorder:
    """Counts one run's requests as they finish."""

    def __init__(self) -> None:
        self._routes: dict[str, _Route] = {}
        self.visitors = 0
        self.returning_visitors = 0
        self.waited_for_a_slot = 0
        self.checkouts = 0
        self.out_of_stock = 0
        self.order_ids: list[int] = []
        self.checkouts_cut_off = 0

    def _route(self, route: str) -> _Route:
        found = self._routes.get(route)
        if found is None:
            found = self._routes[route] = _Route()
        return found

    def response(self, route: str, status: int, seconds: float) -> None:
        figures = self._route(route)
        kind = f"{min(max(status // 100, 2), 5)}xx"  # 1xx never reaches here
        figures.statuses[kind] += 1
        figures.codes[status] = figures.codes.get(status, 0) + 1
        bucket = bucket_of(seconds, SUB_BUCKETS) if seconds > 0 else "z"
        figures.buckets[bucket] = figures.buckets.get(bucket, 0) + 1
        figures.slowest = max(figures.slowest, seconds)

    def transport_error(self, route: str) -> None:
        self._route(route).transport_errors += 1

    def checkout(self, order_id: int) -> None:
        self.checkouts += 1
        if len(self.order_ids) < ORDER_IDS_KEPT:
            self.order_ids.append(order_id)

    def report(self, seconds: float) -> LoadReport:
        routes = tuple(
            RouteFigures.of(route, figures) for route, figures in sorted(self._routes.items())
        )
        return LoadReport(
            seconds=seconds,
            routes=routes,
            visitors=self.visitors,
            returning_visitors=self.returning_visitors,
            waited_for_a_slot=self.waited_for_a_slot,
            checkouts=self.checkouts,
            out_of_stock=self.out_of_stock,
            order_ids=tuple(self.order_ids),
            checkouts_cut_off=self.checkouts_cut_off,
        )


@dataclass(frozen=True, slots=True)
class RouteFigures:
    """One route template's requests, statuses and latency (seconds)."""

    route: str
    statuses: Mapping[str, int]  # "2xx".."5xx" -> responses
    codes: Mapping[int, int]  # each status code -> responses
    transport_errors: int
    p50: float | None
    p90: float | None
    p99: float | None
    slowest: float | None

    @classmethod
    def of(cls, route: str, figures: _Route) -> RouteFigures:
        latency = Histogram(SUB_BUCKETS, dict(figures.buckets))
        high = figures.slowest if figures.buckets else None
        p50, p90, p99 = (latency.percentile(p, high=high) for p in (50, 90, 99))
        codes = dict(sorted(figures.codes.items()))
        return cls(
            route, dict(figures.statuses), codes, figures.transport_errors, p50, p90, p99, high
        )

    @property
    def responses(self) -> int:
        return sum(self.statuses.values())

    @property
    def requests(self) -> int:
        return self.responses + self.transport_errors


@dataclass(frozen=True, slots=True)
class LoadReport:
    """A load run's figures: per route template and in all."""

    seconds: float  # how long the run lasted
    routes: tuple[RouteFigures, ...]
    visitors: int  # visits started
    returning_visitors: int  # of which came back with their cookies
    waited_for_a_slot: int  # arrivals delayed by the concurrency cap
    checkouts: int  # checkouts acknowledged: 303 to /orders/N
    out_of_stock: int  # checkouts refused with 409
    order_ids: tuple[int, ...]  # the acknowledged orders (the first 100,000)
    checkouts_cut_off: int = 0  # checkouts sent but unanswered when the run was stopped

    def status(self, kind: str) -> int:
        """Responses of one class, ``"5xx"`` say, over every route."""
        return sum(route.statuses[kind] for route in self.routes)

    def code(self, status: int) -> int:
        """Responses of one status code, 403 say, over every route."""
        return sum(route.codes.get(status, 0) for route in self.routes)

    @property
    def requests(self) -> int:
        return sum(route.requests for route in self.routes)

    @property
    def transport_errors(self) -> int:
        return sum(route.transport_errors for route in self.routes)

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    def route(self, name: str) -> RouteFigures | None:
        return next((r for r in self.routes if r.route == name), None)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON values (``webtier loadgen --json``; units in
        the field names)."""
        return {
            "seconds": self.seconds,
            "requests": self.requests,
            "requests_per_second": self.requests_per_second,
            "statuses": {kind: self.status(kind) for kind in STATUS_CLASSES},
            "transport_errors": self.transport_errors,
            "visitors": self.visitors,
            "returning_visitors": self.returning_visitors,
            "waited_for_a_slot": self.waited_for_a_slot,
            "checkouts": self.checkouts,
            "out_of_stock": self.out_of_stock,
            "checkouts_cut_off": self.checkouts_cut_off,
            "order_ids": list(self.order_ids),
            "routes": [
                {
                    "route": r.route,
                    "requests": r.requests,
                    "statuses": dict(r.statuses),
                    "status_codes": {str(code): n for code, n in r.codes.items()},
                    "transport_errors": r.transport_errors,
                    "p50_seconds": r.p50,
                    "p90_seconds": r.p90,
                    "p99_seconds": r.p99,
                    "max_seconds": r.slowest,
                }
                for r in self.routes
            ],
        }

    def table(self) -> Table:
        """The per-route figures as a rich table, the totals in its caption."""
        from rich import box
        from rich.table import Table

        table = Table(
            title=f"{self.requests:,} requests in {self.seconds:.1f} s: "
            f"{self.requests_per_second:,.1f} requests/s",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            caption=self._caption(),
            caption_justify="left",
        )
        for header in ("route", "requests", "p50 ms", "p90 ms", "p99 ms", "max ms"):
            table.add_column(header, justify="left" if header == "route" else "right")
        for header in (*STATUS_CLASSES, "errors"):
            table.add_column(header, justify="right")
        for r in self.routes:
            cells = [r.route, f"{r.requests:,}"]
            cells += [_ms(v) for v in (r.p50, r.p90, r.p99, r.slowest)]
            cells += [f"{r.statuses[k]:,}" for k in STATUS_CLASSES]
            cells.append(f"{r.transport_errors:,}")
            table.add_row(*cells)
        return table

    def _caption(self) -> str:
        statuses = ", ".join(f"{kind} {self.status(kind):,}" for kind in STATUS_CLASSES)
        parts = [
            f"{statuses}, transport errors {self.transport_errors:,}",
            f"{self.visitors:,} visitors ({self.returning_visitors:,} returning), "
            f"{self.checkouts:,} checkouts acknowledged, {self.out_of_stock:,} out of stock",
        ]
        if self.waited_for_a_slot:
            parts.append(
                f"{self.waited_for_a_slot:,} arrivals waited for a free slot "
                "(the shop is slower than the rate asked for)"
            )
        if self.checkouts_cut_off:
            parts.append(f"{self.checkouts_cut_off} checkouts cut off unanswered at the stop")
        return "\n".join(parts)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"
