# Generated from src/webtier/ranking/aio.py by scripts/unasync.py: do not edit.
"""The ranking's sync API: the ``tier.ranking`` part, the view
aggregator and the top-N copy it opens.
It is generated from :mod:`webtier.ranking.aio` (scripts/unasync.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webtier._core.facade import Part, sync_op
from webtier._core.flush import SyncFlusher, SyncPeriodic
from webtier._core.protocol import Op, Request
from webtier.config import Config
from webtier.errors import WebtierError
from webtier.ranking import ops
from webtier.ranking.top_items import TopCopy, log
from webtier.ranking.views import ViewCounter, ViewRecording


class Ranking(Part):
    """Item views ranked by count (Redis in Action 2.5): see docs/ranking.md."""

    rank = sync_op(ops.rank)
    top = sync_op(ops.top)
    rescale = sync_op(ops.rescale)

    def __init__(self, run: Any, config: Config, one_node: bool) -> None:
        super().__init__(run, config)
        # How this tier counts views (sessions count theirs through it too).
        self.views = ViewCounter(config, one_node)

    def view_requests(self, item: str) -> tuple[Request, ...]:
        """The requests that count one view of ``item``, for other parts to
        send in their own round trip; ``()`` while an aggregator is open,
        which counted it in process."""
        return self.views.requests(item)

    def record_view(self, item: str) -> None:
        """Count one view of ``item`` (in process while an aggregator is open)."""
        return self._run(ops.send(self.view_requests(item)))  # type: ignore[no-any-return]

    def aggregator(
        self, *, flush_interval: float = 1.0, max_pending: int = 100_000
    ) -> ViewAggregator:
        """Count views in process from now on, flushed every ``flush_interval``
        seconds (see :mod:`webtier.ranking.views`); close it to count in Redis
        again. The one opened last counts (close the one it replaces)."""
        aggregator = ViewAggregator(
            self._run, self._config, flush_interval=flush_interval, max_pending=max_pending
        )
        self.views.aggregator = aggregator
        return aggregator

    def top_items(self, n: int = 10_000, *, refresh: float = 5.0) -> TopItems:
        """A client-side copy of the ``n`` most viewed items, refreshed every
        ``refresh`` seconds, for admission checks without a round trip."""
        return TopItems(self._run, self._config, n, refresh)


class ViewAggregator(ViewRecording, SyncFlusher):
    """Views summed in process and flushed from a daemon thread: open one with
    ``tier.ranking.aggregator()``; ``incr(item)`` counts one view."""


class TopItems(TopCopy):
    """A copy of the ``n`` most viewed items, refreshed from a daemon thread every
    ``refresh`` seconds: open one with ``tier.ranking.top_items()``. It is
    loaded at once, in the background (``refresh_now()`` waits for a copy):
    the constructor does no I/O."""

    def __init__(
        self,
        run: Callable[[Op[Any]], Any],
        config: Config,
        n: int,
        refresh: float,
    ) -> None:
        super().__init__(config, n, refresh)
        self._run = run
        self._refresher = SyncPeriodic(self._refresh, refresh, "webtier-top-items")

    def refresh_now(self) -> bool:
        """Load the set now; False (and the last copy kept) if Redis failed."""
        try:
            self._run(self._load())
        except WebtierError as error:
            return self._outcome(error)
        return self._outcome(None)

    def close(self) -> None:
        self._refresher.close()

    def _refresh(self) -> None:
        try:
            self.refresh_now()
        except Exception:  # the refreshes must outlive a bug in one of them
            log.exception("top items refresh failed")

    def __enter__(self) -> TopItems:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
