"""The JSON behind the dashboard's charts and tables.

Every endpoint runs one reader of :mod:`webtier.overview`, a fixed
number of round trips whatever the number of counters. Answers: 200 with
the data, 400 for a malformed query, 404 for a counter or a context Redis
does not know, 503 ``{"error": "Redis unreachable"}`` when it cannot be
read within :data:`TIME_LIMIT` (the panel says so and keeps polling).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from webtier import overview
from webtier._core.deadline import time_limit
from webtier._core.replicas import replica_reads
from webtier.aio import WebTier
from webtier.config import ACCESS_TIME
from webtier.errors import InvalidInput, WebtierError
from webtier.types import Summary

Endpoint = Callable[[Request], Awaitable[JSONResponse]]
UNREACHABLE = "Redis unreachable"
# Seconds an answer may wait for Redis, its tries included (the web
# middlewares' budget): a hung server costs a poll that, not the client's
# socket timeouts and retries.
TIME_LIMIT = 1.0


class NotFound(Exception):
    """A counter or context that Redis does not know."""


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(name, "must be an integer", raw) from None
    if not low <= value <= high:
        raise InvalidInput(name, f"must be within {low}..{high}", value)
    return value


def _by(request: Request) -> str:
    by = request.query_params.get("by", "mean")
    if by not in ("mean", "max", "p50", "p95", "p99"):
        raise InvalidInput("by", "must be mean, max, p50, p95 or p99", by)
    return by


def _periods(tier: WebTier, request: Request) -> int:
    """The statistics periods covering the last ``hours`` hours."""
    settings = tier.config.stats
    hours = _int(request, "hours", 1, 1, settings.keep * settings.period // 3600 + 1)
    return min(max(1, math.ceil(hours * 3600 / settings.period)), settings.keep + 1)


def _summary(summary: Summary) -> dict[str, Any]:
    return {
        "context": summary.context,
        "count": summary.count,
        "errors": summary.errors,
        "mean": summary.mean,
        "stddev": summary.stddev,
        "min": summary.min,
        "max": summary.max,
        "p50": summary.percentile(50),
        "p95": summary.percentile(95),
        "p99": summary.percentile(99),
    }


def endpoint(
    handler: Callable[[WebTier, Request], Awaitable[Any]],
    tier: WebTier,
    *,
    lag_tolerated: bool = True,
) -> Endpoint:
    """``handler``'s result as JSON, its failures as the statuses above.
    ``lag_tolerated``: its reads may be a replica's (:func:`webtier.replica_reads`),
    as a chart's may; not an action's, which reads what it then changes."""

    async def answer(request: Request) -> JSONResponse:
        try:
            with time_limit(TIME_LIMIT), replica_reads() if lag_tolerated else nullcontext():
                body = await handler(tier, request)
        except NotFound as missing:
            return JSONResponse({"error": str(missing)}, status_code=404)
        except InvalidInput as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        except WebtierError:
            return JSONResponse({"error": UNREACHABLE}, status_code=503)
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    return answer


async def settings(tier: WebTier, request: Request) -> dict[str, Any]:
    """What the page's pickers offer (no Redis read)."""
    cfg = tier.config
    return {
        "precisions": list(cfg.counters.seconds),
        "stats_period": cfg.stats.period,
        "stats_hours": cfg.stats.keep * cfg.stats.period // 3600 + 1,
        "histograms": cfg.stats.histograms,
    }


async def counters(tier: WebTier, request: Request) -> dict[str, Any]:
    """A page of counter names (``offset``, ``limit``, ``prefix``) with the
    latest slice of each at ``precision``."""
    cfg = tier.config
    precision = _int(request, "precision", cfg.counters.seconds[0], 1, 2**31)
    overview.check_precision(cfg, precision)
    prefix = request.query_params.get("prefix") or None
    page = await tier.transport.run(
        overview.read_counter_page(
            cfg,
            precision,
            prefix=prefix,
            offset=_int(request, "offset", 0, 0, 2**31),
            limit=_int(request, "limit", 50, 1, 500),
        )
    )
    return {
        "precision": precision,
        "total": page.total,
        "offset": page.offset,
        "counters": [
            {"name": name, "latest": samples[-1][1] if samples else 0}
            for name, samples in page.series.items()
        ],
    }


async def series(tier: WebTier, request: Request) -> dict[str, Any]:
    """Counters ``name`` (repeated: several overlaid) at ``precision``."""
    cfg = tier.config
    names = request.query_params.getlist("name")
    if not names or len(names) > 20:
        raise InvalidInput("name", "give 1 to 20 counters", len(names))
    precision = _int(request, "precision", cfg.counters.seconds[0], 1, 2**31)
    overview.check_precision(cfg, precision)
    # A name that could not be a counter's is one the index does not list.
    page = await tier.transport.run(
        overview.read_counter_page(cfg, precision, names=names, limit=len(names))
    )
    if page.unknown:
        raise NotFound(f"no such counter: {', '.join(page.unknown)}")
    return {"precision": precision, "series": page.series}


async def statistics(tier: WebTier, request: Request) -> dict[str, Any]:
    """The ``limit`` contexts with the highest ``by`` over ``hours`` hours."""
    by = _by(request)
    limit = _int(request, "limit", 20, 1, 500)
    periods = _periods(tier, request)
    summaries = await tier.transport.run(
        overview.read_stats(tier.config, periods, limit=limit, by=by)
    )
    return {"by": by, "contexts": [_summary(s) for s in summaries]}


async def context(tier: WebTier, request: Request) -> dict[str, Any]:
    """One context's ``AccessTime``, one point per period, over ``hours`` hours."""
    name = request.path_params["context"]
    try:
        periods = await tier.stats.series(name, ACCESS_TIME, _periods(tier, request))
    except InvalidInput as error:
        if error.field != "contexts":
            raise
        raise NotFound(f"no such context: {name}") from None
    if not any(summary.count for summary in periods):
        raise NotFound(f"no such context: {name}")
    points = [{"start": s.start, **_summary(s)} for s in periods]
    return {"context": name, "period": tier.config.stats.period, "points": points}


async def health(tier: WebTier, request: Request) -> dict[str, Any]:
    """Sessions, the cleaner, the page cache, rows, workers and the top items."""
    cfg = tier.config
    precision = _int(request, "precision", 60, 1, 2**31)
    overview.check_precision(cfg, precision)
    own = [*overview.PAGECACHE_COUNTERS.values(), overview.SESSIONS_CLEANED]
    page = await tier.transport.run(
        overview.read_counter_page(cfg, precision, names=own, limit=len(own))
    )
    state = await tier.transport.run(overview.read_health(cfg, top=10))
    known = page.series
    now = cfg.clock.wall()
    return {
        "precision": precision,
        "now": now,
        "pagecache": {
            outcome: known.get(name, []) for outcome, name in overview.PAGECACHE_COUNTERS.items()
        },
        "sessions": {
            "count": state.sessions.sessions,
            "limit": state.session_limit,
            "busiest_shard": state.sessions.busiest_shard,
            "oldest_age": None if state.sessions.oldest is None else now - state.sessions.oldest,
            "cleaned": known.get(overview.SESSIONS_CLEANED, []),
        },
        "rows": [
            {
                "source": source,
                "scheduled": s.scheduled,
                "due": s.due,
                "loading": s.loading,
                "lag": s.overdue,
            }
            for source, s in state.rows.items()
        ],
        "workers": [
            {
                "id": w.id,
                "host": w.host,
                "pid": w.pid,
                "jobs": list(w.jobs),
                "beat_age": max(0.0, now - w.beat),
                "up": max(0.0, now - w.started),
                "last_job": w.last_job,
                "last_outcome": w.last_outcome,
                "last_age": max(0.0, now - w.last_step) if w.last_job else None,
            }
            for w in state.workers
        ],
        "top_items": [{"item": item, "views": views} for item, views in state.top_items],
    }
