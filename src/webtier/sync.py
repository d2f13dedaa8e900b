# Generated from src/webtier/aio.py by scripts/unasync.py: do not edit.
"""The sync API: :class:`WebTier` over a sync redis-py client.

Each capability's part (``tier.counters``, ``tier.sessions``...) is its
package's own (``webtier.counters.sync``...); this module only puts them
together on one transport. :mod:`webtier.aio` has the same classes and
method names for asyncio; both run the same operations.
"""

from __future__ import annotations

from typing import Any

from webtier._core.drive import SyncClient, SyncTransport
from webtier.config import Config
from webtier.counters.sync import Counters
from webtier.deployment.sync import Deployment
from webtier.pagecache.sync import PageCache
from webtier.ranking.sync import Ranking
from webtier.rows.sync import Rows
from webtier.sessions.sync import Carts, Sessions, SessionStore
from webtier.stats.sync import Stats
from webtier.workers.sync import Workers


class WebTier:
    """webtier on one sync redis-py client (``redis.Redis`` or
    ``redis.cluster.RedisCluster``), which it uses but does not own."""

    def __init__(self, client: SyncClient, config: Config | None = None) -> None:
        config = config or Config()
        self.client = client
        self.transport = SyncTransport(client, config.retry)
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
