"""The item view ranking, seen from the client.

Every view of an item adds to the zset of its shard (one zset in the book's
layout, the default on a single server; on Redis Cluster, 12 spread over
the masters). Two client-side helpers take most of the traffic off Redis
(docs/ranking.md has the figures):

* :class:`ViewAggregator` / :class:`AsyncViewAggregator` sum views in
  process and send the sums every ``flush_interval`` seconds, one ZINCRBY per
  distinct item, one request per shard. They are the counters'
  :class:`~webtier.recorder.Recorder` with another flush. While one is open,
  the tier's :class:`ViewCounter` (which sessions count views through) and
  ``tier.ranking.record_view(item)`` count in process.
* :class:`TopItems` / :class:`AsyncTopItems` keep a copy of the N most viewed
  items, refreshed every ``refresh`` seconds, so an admission test ("is this
  item in the top 10,000?") costs a dict lookup instead of a ZREVRANK.

What they trade: views reach the ranking up to ``flush_interval`` late (and
a crash loses at most that much of them); the cached top set is up to
``refresh`` seconds old. The ranking is halved every 5 minutes, so neither
changes what it says in any way that matters.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from webtier._core.keys import check_name, item_shard
from webtier._core.protocol import Op, Request
from webtier._ops import ranking as views
from webtier.config import Config
from webtier.counters import AsyncRecorder, Recorder
from webtier.counters import ops as counters
from webtier.errors import ConfigError, InvalidInput, WebtierError

log = logging.getLogger("webtier.ranking")


# -- in-process aggregation of views --------------------------------------------------


def _send_views(
    cfg: Config, entries: list[counters.Entry]
) -> Op[list[tuple[list[counters.Entry], WebtierError | None]]]:
    """Flush the recorder's (item, views, time) sums as one ZINCRBY per item,
    one request per shard of the ranking (one round trip per node)."""
    summed: dict[str, int] = {}
    for item, count, _ in entries:
        summed[item] = summed.get(item, 0) + count
    results = yield from views.record_many(cfg, [(i, n) for i, n in summed.items() if n])
    # Each shard's request carries its items: its outcome is their entries'.
    outcome = {item: error for sums, error in results for item, _ in sums}
    by_outcome: dict[int, tuple[list[counters.Entry], WebtierError | None]] = {}
    for entry in entries:
        error = outcome.get(entry[0])
        by_outcome.setdefault(id(error), ([], error))[0].append(entry)
    return list(by_outcome.values())


class ViewAggregator(Recorder):
    """Views summed in process and flushed from a daemon thread: open one
    with ``tier.ranking.aggregator()``; ``incr(item)`` counts one view."""

    def _send(
        self, entries: list[counters.Entry]
    ) -> Op[list[tuple[list[counters.Entry], WebtierError | None]]]:
        return _send_views(self._config, entries)


class AsyncViewAggregator(AsyncRecorder):
    """Views summed in process and flushed from an asyncio task: open one
    with ``tier.ranking.aggregator()`` inside a running loop."""

    def _send(
        self, entries: list[counters.Entry]
    ) -> Op[list[tuple[list[counters.Entry], WebtierError | None]]]:
        return _send_views(self._config, entries)


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
        self.aggregator: ViewAggregator | AsyncViewAggregator | None = None
        shards = len(views.shards_of(config))
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
        return views.view_requests(self._config, item, upkeep=self.upkeep_due(item))

    def upkeep(self, item: str) -> tuple[Request, ...]:
        """For a view of ``item`` counted elsewhere (inside a touch's
        script): its shard's upkeep to send with it, when due."""
        if not self.upkeep_due(item):
            return ()
        return (views.upkeep_request(self._config, views.shard_for(self._config, item)),)


# -- the client-side top N ---------------------------------------------------------------


class _TopBase:
    """What the sync and asyncio top sets share: the copy and its checks."""

    def __init__(self, config: Config, n: int, refresh: float) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1_000_000:
            raise ConfigError("n must be an int, 1..1000000")
        if not (isinstance(refresh, int | float) and 0 < refresh <= 86400):
            raise ConfigError("refresh must be 0 to 86400 seconds")
        self._config, self.n, self.refresh = config, n, refresh
        self._ranks: dict[str, int] = {}
        self.loaded_at: float | None = None  # time.monotonic() of the last load
        self._failing = False

    def rank(self, item: str) -> int | None:
        """``item``'s place (0 = most viewed) as of the last refresh, or None
        if it was not among the ``n`` most viewed."""
        return self._ranks.get(item)

    def admits(self, item: str, top: int | None = None) -> bool:
        """Whether ``item`` was among the ``top`` (default ``n``) most viewed
        at the last refresh. False before the first load succeeds."""
        if top is None:
            top = self.n
        elif isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= self.n:
            raise InvalidInput("top", f"must be 0..{self.n}, the size of this set", top)
        rank = self._ranks.get(item)
        return rank is not None and rank < top

    def __len__(self) -> int:
        return len(self._ranks)

    def _load(self) -> Op[None]:
        items = yield from views.top_items(self._config, self.n)
        # One assignment: readers see the old copy or the new one, never a mix.
        self._ranks = {item: place for place, item in enumerate(items)}
        self.loaded_at = time.monotonic()

    def _outcome(self, error: WebtierError | None) -> bool:
        # An outage is logged when it starts and when it ends, not per refresh;
        # meanwhile the last copy keeps answering.
        if error is None:
            if self._failing:
                log.warning("top %d items: refreshed again", self.n)
            self._failing = False
            return True
        if not self._failing:
            log.warning("top %d items: refresh failed, keeping the last copy: %s", self.n, error)
        self._failing = True
        return False


class TopItems(_TopBase):
    """A copy of the ``n`` most viewed items, refreshed by a daemon thread
    every ``refresh`` seconds: open one with ``tier.ranking.top_items()``.
    The thread loads it at once (call :meth:`refresh_now` to wait for a
    copy); the constructor does no I/O, like :class:`AsyncTopItems`'s."""

    def __init__(
        self, run: Callable[[Op[Any]], Any], config: Config, n: int, refresh: float
    ) -> None:
        super().__init__(config, n, refresh)
        self._run = run
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="webtier-top-items", daemon=True)
        self._thread.start()

    def refresh_now(self) -> bool:
        """Load the set now; False (and the last copy kept) if Redis failed."""
        try:
            self._run(self._load())
        except WebtierError as error:
            return self._outcome(error)
        return self._outcome(None)

    def close(self) -> None:
        self._closed.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _loop(self) -> None:
        while not self._closed.is_set():
            try:
                self.refresh_now()
            except Exception:  # the thread must outlive a bug in one refresh
                log.exception("top items refresh failed")
            self._closed.wait(self.refresh)

    def __enter__(self) -> TopItems:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncTopItems(_TopBase):
    """A copy of the ``n`` most viewed items, refreshed by an asyncio task
    every ``refresh`` seconds: create it in a running loop with
    ``tier.ranking.top_items()``; the task loads it at once (``await
    refresh_now()`` to wait for a copy)."""

    def __init__(
        self,
        run: Callable[[Op[Any]], Coroutine[Any, Any, Any]],
        config: Config,
        n: int,
        refresh: float,
    ) -> None:
        super().__init__(config, n, refresh)
        self._run = run
        self._closed = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="webtier-top-items")

    async def refresh_now(self) -> bool:
        """Load the set now; False (and the last copy kept) if Redis failed."""
        try:
            await self._run(self._load())
        except WebtierError as error:
            return self._outcome(error)
        return self._outcome(None)

    async def aclose(self) -> None:
        self._closed.set()
        await self._task

    async def _loop(self) -> None:
        while not self._closed.is_set():
            try:
                await self.refresh_now()
            except Exception:
                log.exception("top items refresh failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), self.refresh)

    async def __aenter__(self) -> AsyncTopItems:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
