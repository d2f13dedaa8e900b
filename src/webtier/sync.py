"""The sync API: :class:`WebTier` over a sync redis-py client.

:mod:`webtier.aio` has the same classes and method names for asyncio; both
run the same operations (:mod:`webtier._ops`).
"""

from __future__ import annotations

from typing import Any

from webtier._drive import SyncClient, SyncTransport
from webtier._facade import Part, sync_op
from webtier._ops import counters
from webtier._ops import row_refresh as refresh_ops
from webtier._ops import rows as row_ops
from webtier._ops import stats as statistics
from webtier._ops import workers as liveness
from webtier.config import Config
from webtier.recorder import Recorder
from webtier.timing import AccessTimer


class Counters(Part):
    """Time-series counters at several precisions (Redis in Action 5.2.1)."""

    record = sync_op(counters.record)
    get = sync_op(counters.get)
    get_many = sync_op(counters.get_many)
    names = sync_op(counters.names)
    clean = sync_op(counters.clean)

    def recorder(self, *, flush_interval: float = 0.1, max_pending: int = 10_000) -> Recorder:
        """A batched recorder for hot counters: see :class:`webtier.recorder.Recorder`."""
        return Recorder(
            self._run, self._config, flush_interval=flush_interval, max_pending=max_pending
        )


class Stats(Part):
    """Statistics per context, type and period, with percentiles and a
    ranking of the slowest contexts (Redis in Action 5.2.2-5.2.3)."""

    record = sync_op(statistics.record)
    get = sync_op(statistics.get)
    get_many = sync_op(statistics.get_many)
    series = sync_op(statistics.series)
    series_many = sync_op(statistics.series_many)
    slowest = sync_op(statistics.slowest)

    def access_time(self, context: str) -> AccessTimer:
        """Time a block (``with``) or each call of a function (decorator)
        as ``context``'s ``AccessTime``, even when it raises: see
        :mod:`webtier.timing`."""
        return AccessTimer(self._run, self._config, context)


class Workers(Part):
    """Maintenance workers that announce themselves (see :mod:`webtier.workers`)."""

    alive = sync_op(liveness.alive)


# -- row cache ---------------------------------------------------------------------------


class Rows(Part):
    """Database rows kept fresh in Redis (Redis in Action 2.4): see docs/rows.md."""

    schedule = sync_op(row_ops.schedule)
    unschedule = sync_op(row_ops.unschedule)
    get = sync_op(row_ops.get)
    get_many = sync_op(row_ops.get_many)
    invalidate = sync_op(row_ops.invalidate)
    refresh_now = sync_op(row_ops.refresh_now)
    refresh_due = sync_op(refresh_ops.refresh_due)
    status = sync_op(row_ops.status)


class WebTier:
    """webtier on one sync redis-py client (``redis.Redis`` or
    ``redis.cluster.RedisCluster``), which it uses but does not own."""

    def __init__(self, client: SyncClient, config: Config | None = None) -> None:
        self.config = config or Config()
        self.client = client
        self.transport = SyncTransport(client, self.config.retry)
        run: Any = self.transport.run
        self.counters = Counters(run, self.config)
        self.workers = Workers(run, self.config)
        self.rows = Rows(run, self.config)
        self.stats = Stats(run, self.config)
