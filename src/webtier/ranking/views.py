"""How a process counts item views: in Redis, with each shard's upkeep
riding along, or in process while an aggregator is open.

Every view of an item adds to the zset of its shard (one zset in the book's
layout, the default on a single server; on Redis Cluster, 12 spread over
the masters). :class:`~webtier.ranking.ViewAggregator` /
:class:`~webtier.ranking.AsyncViewAggregator` take most of that traffic off
Redis (docs/ranking.md has the figures): they sum views in process and send
the sums every ``flush_interval`` seconds, one ZINCRBY per distinct item, one
request per shard: the counters' in-process sums
(:mod:`webtier.counters.tally`) with another flush. While one is open, the
tier's :class:`ViewCounter` (which sessions count views through) and
``tier.ranking.record_view(item)`` count in process.

What it trades: views reach the ranking up to ``flush_interval`` late (and
a crash loses at most that much of them). The ranking is halved every 5
minutes, so that changes nothing that matters.
"""

from __future__ import annotations

import itertools
import time

from webtier import counters
from webtier._core.keys import check_name, item_shard
from webtier._core.protocol import Op, Request
from webtier.config import Config
from webtier.counters.tally import CounterRecording
from webtier.errors import WebtierError
from webtier.ranking import ops

# -- in-process aggregation of views --------------------------------------------------


def send_views(
    cfg: Config, entries: list[counters.ops.Entry]
) -> Op[list[tuple[list[counters.ops.Entry], WebtierError | None]]]:
    """Flush the recorder's (item, views, time) sums as one ZINCRBY per item,
    one request per shard of the ranking (one round trip per node)."""
    summed: dict[str, int] = {}
    for item, count, _ in entries:
        summed[item] = summed.get(item, 0) + count
    results = yield from ops.record_many(cfg, [(i, n) for i, n in summed.items() if n])
    # Each shard's request carries its items: its outcome is their entries'.
    outcome = {item: error for sums, error in results for item, _ in sums}
    by_outcome: dict[int, tuple[list[counters.ops.Entry], WebtierError | None]] = {}
    for entry in entries:
        error = outcome.get(entry[0])
        by_outcome.setdefault(id(error), ([], error))[0].append(entry)
    return list(by_outcome.values())


class ViewRecording(CounterRecording):
    """What both view aggregators share: the counters' in-process sums,
    flushed into the ranking instead (:func:`send_views`)."""

    def _send(
        self, entries: list[counters.ops.Entry]
    ) -> Op[list[tuple[list[counters.ops.Entry], WebtierError | None]]]:
        return send_views(self._config, entries)


# Every this many views a process counts in Redis, it sends the ranking's
# upkeep with one (ranking_upkeep.lua): between two upkeeps the ranking grows
# by at most this many items per process.
UPKEEP_EVERY = 64


class ViewCounter:
    """How one tier counts item views: in process while an aggregator is
    open, else in Redis, with a shard's upkeep (trim and expiry) riding
    along every :data:`UPKEEP_EVERY`-th view of that shard and at least
    every eighth of the ranking's ``expire_after``, so that every shard stays
    bounded and expires when views stop, with no worker running.
    ``tier.ranking.views`` is the tier's; sessions count the views of their
    touches through it."""

    def __init__(self, config: Config, one_node: bool) -> None:
        self._config = config
        # A single server: a touch may count the view inside its own script.
        self.one_node = one_node
        self.aggregator: ViewRecording | None = None  # the one open, counting in process
        shards = len(ops.shards_of(config))
        self._views = [itertools.count(1) for _ in range(shards)]
        self._upkeep_every = config.ranking.expire_after / 8  # seconds
        self._next_upkeep = [0.0] * shards  # time.monotonic() when due anyway

    @property
    def inline(self) -> bool:
        """Whether a session's touch may count the view in its own script
        (one server, and no aggregator counting in process)."""
        return self.one_node and self.aggregator is None

    def upkeep_due(self, item: str) -> bool:
        """Counts one view of ``item`` (a checked name); whether its shard's
        upkeep goes with it."""
        shard = item_shard(item, len(self._views))
        now = time.monotonic()
        if next(self._views[shard]) % UPKEEP_EVERY and now < self._next_upkeep[shard]:
            return False
        self._next_upkeep[shard] = now + self._upkeep_every
        return True

    def requests(self, item: str) -> tuple[Request, ...]:
        """Count one view of ``item`` now: in the aggregator while it is
        open (nothing left to send), else the requests to send."""
        aggregator = self.aggregator
        if aggregator is not None:
            try:
                aggregator.incr(item)
            except RuntimeError:  # closed meanwhile: count in Redis directly
                pass
            else:
                return ()
        check_name("item", item)
        return ops.view_requests(self._config, item, upkeep=self.upkeep_due(item))

    def upkeep(self, item: str) -> tuple[Request, ...]:
        """For a view of ``item`` counted elsewhere (inside a touch's
        script): its shard's upkeep to send with it, when due."""
        if not self.upkeep_due(item):
            return ()
        return (ops.upkeep_request(self._config, ops.shard_for(self._config, item)),)
