"""What the timing adapters share: their settings and recorder
(:class:`Timing`), the context of a request no route matched, and recording
a duration, one round trip per request or batched in a recorder, logging a
failure instead of raising it into the app."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from webtier import stats
from webtier._core.deadline import check_limit
from webtier._core.flush import check_interval
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


@dataclass(frozen=True)
class TimingOptions:
    """How access time is recorded: ``unmatched`` names the requests no
    route matched; ``time_limit`` is how long a direct record may wait for
    Redis (seconds); ``batched`` adds each duration to an in-process
    recorder flushed every ``flush_interval`` seconds, instead of a round
    trip per request."""

    unmatched: str = UNMATCHED
    time_limit: float | None = 1.0
    batched: bool = True
    flush_interval: float = FLUSH_INTERVAL


Tier = TypeVar("Tier")
Recorder = TypeVar("Recorder", StatsRecorder, AsyncStatsRecorder)
Request = TypeVar("Request")  # what the route is read from: an ASGI scope, a WSGI environ


class Timing(Generic[Tier, Recorder, Request]):
    """What both timing middlewares hold: the tier, how a request's route
    is named, the time limit of a direct record, and the recorder that
    batches the durations (created by a subclass on the first request)."""

    def __init__(
        self,
        tier: Tier,
        route: Callable[[Request], str | None],
        unmatched: str,
        time_limit: float | None,
        batched: bool,
        flush_interval: float,
    ) -> None:
        self.tier, self.route, self.unmatched = tier, route, unmatched
        # Seconds a record may wait for Redis: a hung server must not hold
        # the worker long after the response went out (unbatched records).
        self.time_limit = check_limit(time_limit, "time_limit")
        self.batched = bool(batched)
        self.flush_interval = check_interval(flush_interval)
        self._recorder: Recorder | None = None
        self._closed = False

    @property
    def recorder(self) -> Recorder | None:
        """The recorder batching the durations, once a request created it."""
        return self._recorder

    def _batched(self, request: Request, seconds: float, failed: bool) -> str | None:
        """``None`` when the request's duration went to the recorder (no
        I/O); else the context to record it under directly (unbatched, or
        the recorder closed meanwhile)."""
        context = self.route(request) or self.unmatched
        return None if self._added(context, seconds, failed) else context

    def _added(self, context: str, seconds: float, failed: bool) -> bool:
        """Whether the duration went to the recorder (no I/O)."""
        return (
            self.batched and not self._closed and batch(self._current(), context, seconds, failed)
        )

    def _current(self) -> Recorder:
        """The recorder of this process (or loop), created on first use."""
        raise NotImplementedError
