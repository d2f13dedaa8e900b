"""The asyncio API: :class:`WebTier` over an asyncio redis-py client.

:mod:`webtier.sync` has the same classes and method names; both
run the same operations (:mod:`webtier._ops`).
"""

from __future__ import annotations

from typing import Any

from webtier._drive import AsyncClient, AsyncTransport
from webtier._facade import Part, async_op
from webtier._ops import counters
from webtier._ops import row_refresh as refresh_ops
from webtier._ops import rows as row_ops
from webtier._ops import stats as statistics
from webtier._ops import workers as liveness
from webtier.config import Config
from webtier.recorder import AsyncRecorder
from webtier.timing import AsyncAccessTimer


class Counters(Part):
    """Time-series counters at several precisions (Redis in Action 5.2.1)."""

    record = async_op(counters.record)
    get = async_op(counters.get)
    get_many = async_op(counters.get_many)
    names = async_op(counters.names)
    clean = async_op(counters.clean)

    def recorder(self, *, flush_interval: float = 0.1, max_pending: int = 10_000) -> AsyncRecorder:
        """A batched recorder for hot counters (create it in a running loop):
        see :class:`webtier.recorder.AsyncRecorder`."""
        return AsyncRecorder(
            self._run, self._config, flush_interval=flush_interval, max_pending=max_pending
        )


class Stats(Part):
    """Statistics per context, type and period, with percentiles and a
    ranking of the slowest contexts (Redis in Action 5.2.2-5.2.3)."""

    record = async_op(statistics.record)
    get = async_op(statistics.get)
    get_many = async_op(statistics.get_many)
    series = async_op(statistics.series)
    series_many = async_op(statistics.series_many)
    slowest = async_op(statistics.slowest)

    def access_time(self, context: str) -> AsyncAccessTimer:
        """Time a block (``async with``) or each call of a coroutine function (decorator)
        as ``context``'s ``AccessTime``, even when it raises: see
        :mod:`webtier.timing`."""
        return AsyncAccessTimer(self._run, self._config, context)


class Workers(Part):
    """Maintenance workers that announce themselves (see :mod:`webtier.workers`)."""

    alive = async_op(liveness.alive)


# -- row cache ---------------------------------------------------------------------------


class Rows(Part):
    """Database rows kept fresh in Redis (Redis in Action 2.4): see docs/rows.md."""

    schedule = async_op(row_ops.schedule)
    unschedule = async_op(row_ops.unschedule)
    get = async_op(row_ops.get)
    get_many = async_op(row_ops.get_many)
    invalidate = async_op(row_ops.invalidate)
    refresh_now = async_op(row_ops.refresh_now)
    refresh_due = async_op(refresh_ops.refresh_due)
    status = async_op(row_ops.status)


class WebTier:
    """webtier on one asyncio redis-py client (``redis.asyncio.Redis`` or
    ``redis.asyncio.cluster.RedisCluster``), which it uses but does not own."""

    def __init__(self, client: AsyncClient, config: Config | None = None) -> None:
        self.config = config or Config()
        self.client = client
        self.transport = AsyncTransport(client, self.config.retry)
        run: Any = self.transport.run
        self.counters = Counters(run, self.config)
        self.workers = Workers(run, self.config)
        self.rows = Rows(run, self.config)
        self.stats = Stats(run, self.config)
