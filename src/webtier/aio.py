"""The asyncio API: :class:`WebTier` over an asyncio redis-py client.

:mod:`webtier.sync` has the same classes and method names; both
run the same operations (:mod:`webtier._ops`).
"""

from __future__ import annotations

from typing import Any

from webtier._core.drive import AsyncClient, AsyncTransport
from webtier._core.facade import Part, async_op
from webtier._core.sessions_part import SessionsPart
from webtier._ops import carts as cart_ops
from webtier._ops import deployment as settings
from webtier._ops import sessions as session_ops
from webtier._ops import workers as liveness
from webtier.config import Config
from webtier.counters.aio import Counters
from webtier.pagecache.aio import PageCache
from webtier.ranking.aio import Ranking
from webtier.rows.aio import Rows
from webtier.stats.aio import Stats


class Workers(Part):
    """Maintenance workers that announce themselves (see :mod:`webtier.workers`)."""

    alive = async_op(liveness.alive)


# -- sessions and carts ---------------------------------------------------------------


class Sessions(SessionsPart):
    """Login sessions with recently viewed items (Redis in Action 2.1): see docs/sessions.md."""

    new = async_op(session_ops.new)
    check = async_op(session_ops.check)
    info = async_op(session_ops.info)
    login = async_op(session_ops.login)
    logout = async_op(session_ops.logout)
    of_user = async_op(session_ops.of_user)
    revoke = async_op(session_ops.revoke)
    revoke_all = async_op(session_ops.revoke_all)
    data = async_op(session_ops.data)
    update = async_op(session_ops.update)
    discard = async_op(session_ops.discard)
    recently_viewed = async_op(session_ops.recently_viewed)
    clean = async_op(session_ops.clean)
    stats = async_op(session_ops.stats)

    async def touch(self, token: str, *, user: str | None = None, item: str | None = None) -> bool:
        """The book's ``update_token`` for a live session: last seen, the user
        (when given), the viewed ``item`` and its view count, in one round
        trip; ``False`` when there is no such session (strict mode never
        creates one)."""
        result: bool = await self._run(self._touch(token, user, item))
        return result


class Carts(Part):
    """Shopping carts, item -> count, per session (Redis in Action 2.2)."""

    set = async_op(cart_ops.set)
    get = async_op(cart_ops.get)
    clear = async_op(cart_ops.clear)


# -- the deployment's settings --------------------------------------------------------


class Deployment(Part):
    """The settings that decide where the deployment's data lives, stored in
    Redis by its first writer: see docs/deployment-settings.md. ``check()``
    once at startup stores them (first writer) or refuses a mismatch."""

    check = async_op(settings.check)
    stored = async_op(settings.stored)
    adopt = async_op(settings.adopt)
    reset = async_op(settings.reset)


class WebTier:
    """webtier on one asyncio redis-py client (``redis.asyncio.Redis`` or
    ``redis.asyncio.cluster.RedisCluster``), which it uses but does not own."""

    def __init__(self, client: AsyncClient, config: Config | None = None) -> None:
        config = config or Config()
        self.client = client
        self.transport = AsyncTransport(client, config.retry)
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
        self.deployment = Deployment(run, self.config)
