"""What the timing adapters share: the context of a request no route
matched, and recording a duration as an operation that logs a failure
instead of raising it into the app."""

from __future__ import annotations

from webtier import timing
from webtier._core.protocol import Op
from webtier._ops import stats
from webtier.config import ACCESS_TIME, Config
from webtier.errors import WebtierError

UNMATCHED = "<unmatched>"

# WSGI environ key where a framework hook leaves the route's template: WSGI
# middleware outside the app cannot see the app's routing otherwise.
ROUTE_KEY = "webtier.route"


def record(cfg: Config, context: str, seconds: float, failed: bool) -> Op[None]:
    """Records one request's duration as ``context``'s ``AccessTime``.
    Timing is observability: a failure to record (Redis away, thrown in
    here by the transport) is logged, never raised over a served page."""
    try:
        yield from stats.record(cfg, context, ACCESS_TIME, max(seconds, 0.0), failed=failed)
    except WebtierError as error:
        timing.FAILURES.failed(context, error)
