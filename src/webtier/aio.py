"""The asyncio API: :class:`WebTier` over an asyncio client, webtier's own
(:func:`webtier.connect_async`) or redis-py's.

Each capability's part (``tier.counters``, ``tier.sessions``...) is its
package's own (``webtier.counters.aio``...); this module only puts them
together on one transport. :mod:`webtier.sync` has the same classes and
method names; both run the same operations.
"""

from __future__ import annotations

from typing import Any

from webtier._core.mux import AnyAsyncClient, async_transport
from webtier.config import Config
from webtier.counters.aio import Counters
from webtier.deployment.aio import Deployment
from webtier.pagecache.aio import PageCache
from webtier.ranking.aio import Ranking
from webtier.rows.aio import Rows
from webtier.sessions.aio import Carts, Sessions, SessionStore
from webtier.stats.aio import Stats
from webtier.workers.aio import Workers


class WebTier:
    """webtier on one asyncio client, which it uses but does not own:
    webtier's own (:func:`webtier.connect_async`), or a redis-py one
    (``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``)."""

    def __init__(self, client: AnyAsyncClient, config: Config | None = None) -> None:
        config = config or Config()
        self.client = client
        self.transport = async_transport(client, config.retry)
        # The settings left to the client (the ranking's shards) are decided here.
        self.config = config.for_client(cluster=not self.transport.one_node)
        run: Any = self.transport.run
        self.counters = Counters(run, self.config)
        self.ranking = Ranking(run, self.config, self.transport.one_node)
        self.workers = Workers(run, self.config)
        self.rows = Rows(run, self.config)
        self.stats = Stats(run, self.config)
        self.pagecache = PageCache(run, self.config)
        # -- sessions and carts ---
        self.sessions = Sessions(run, self.config, views=self.ranking.views)
        self.carts = Carts(run, self.config)
        self.session_store = SessionStore(run, self.config)
        self.deployment = Deployment(run, self.config)
