"""The item view ranking (Redis in Action 2.5), one package:

- ``ops``: the operations (count views, rank, top, rescale): I/O-free
  generators, sharded by item;
- ``ranking_rescale.lua``, ``ranking_upkeep.lua``: their scripts;
- ``views``: how a process counts views (:class:`~webtier.ranking.views.ViewCounter`),
  and what the view aggregators share;
- ``top_items``: what the client-side copies of the top N share;
- ``aio``: the ``tier.ranking`` part, :class:`AsyncViewAggregator` and
  :class:`AsyncTopItems`; ``sync``: their sync twins, generated from ``aio``.

See docs/ranking.md.
"""

from webtier.ranking.aio import AsyncTopItems, AsyncViewAggregator
from webtier.ranking.sync import TopItems, ViewAggregator

__all__ = ["AsyncTopItems", "AsyncViewAggregator", "TopItems", "ViewAggregator"]
