"""What the timing adapters share: the context of a request no route
matched, and recording a duration, one round trip per request or batched
in a recorder, logging a failure instead of raising it into the app."""

from __future__ import annotations

from webtier import stats
from webtier._core.protocol import Op
from webtier.config import ACCESS_TIME, Config
from webtier.errors import WebtierError
from webtier.stats import AsyncStatsRecorder, StatsRecorder, access_time

UNMATCHED = "<unmatched>"

# WSGI environ key where a framework hook leaves the route's template: WSGI
# middleware outside the app cannot see the app's routing otherwise.
ROUTE_KEY = "webtier.route"

# How often a middleware's recorder flushes by default, seconds: what the
# figures reach Redis late by, at most, and what a crash loses.
FLUSH_INTERVAL = 0.1


def record(cfg: Config, context: str, seconds: float, failed: bool) -> Op[None]:
    """Records one request's duration as ``context``'s ``AccessTime``.
    Timing is observability: a failure to record (Redis away, thrown in
    here by the transport) is logged, never raised over a served page."""
    try:
        yield from stats.ops.record(cfg, context, ACCESS_TIME, max(seconds, 0.0), failed=failed)
    except WebtierError as error:
        access_time.FAILURES.failed(error, f"e.g. {context!r}")


def batch(
    recorder: StatsRecorder | AsyncStatsRecorder, context: str, seconds: float, failed: bool
) -> bool:
    """Adds one request's duration to ``recorder`` (no I/O); False when the
    recorder was closed meanwhile, and the caller records it directly. A bad
    context is logged like a failure to record."""
    try:
        recorder.record(context, ACCESS_TIME, max(seconds, 0.0), failed=failed)
    except WebtierError as error:
        access_time.FAILURES.failed(error, f"e.g. {context!r}")
    except RuntimeError:  # closed: shutting down
        return False
    return True
