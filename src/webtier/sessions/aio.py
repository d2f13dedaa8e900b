"""The sessions' and carts' asyncio API: the ``tier.sessions`` and
``tier.carts`` parts. :mod:`webtier.sessions.sync` is generated from this
module (scripts/unasync.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webtier._core.facade import Part, async_op
from webtier._core.protocol import Op
from webtier.config import Config
from webtier.ranking.views import ViewCounter
from webtier.sessions import carts, cleaner, ops, store, users


class Sessions(Part):
    """Login sessions with recently viewed items (Redis in Action 2.1): see docs/sessions.md."""

    new = async_op(ops.new)
    check = async_op(ops.check)
    info = async_op(ops.info)
    login = async_op(users.login)
    logout = async_op(users.logout)
    of_user = async_op(users.of_user)
    revoke = async_op(users.revoke)
    revoke_all = async_op(users.revoke_all)
    data = async_op(ops.data)
    update = async_op(ops.update)
    discard = async_op(ops.discard)
    recently_viewed = async_op(ops.recently_viewed)
    clean = async_op(cleaner.clean)
    stats = async_op(ops.stats)

    def __init__(
        self,
        run: Callable[[Op[Any]], Any],
        config: Config,
        views: ViewCounter | None = None,
    ) -> None:
        super().__init__(run, config)
        # How a touch counts its item view: the tier's (tier.ranking.views).
        self._views = views

    async def touch(self, token: str, *, user: str | None = None, item: str | None = None) -> bool:
        """The book's ``update_token`` for a live session: last seen, the user
        (when given), the viewed ``item`` and its view count, in one round
        trip; ``False`` when there is no such session (strict mode never
        creates one)."""
        touched = ops.touch(self._config, token, user=user, item=item, views=self._views)
        result: bool = await self._run(touched)
        return result


class Carts(Part):
    """Shopping carts, item -> count, per session (Redis in Action 2.2)."""

    set = async_op(carts.set)
    get = async_op(carts.get)
    clear = async_op(carts.clear)


class SessionStore(Part):
    """Sessions under ids a web framework picks, for its own session
    interface (Django's ``SessionStore``, Flask's, starsessions'): see
    :mod:`webtier.sessions.store` and docs/sessions-middleware.md."""

    read = async_op(store.read_session)
    exists = async_op(store.exists)
    create = async_op(store.create)
    save = async_op(store.save)
    rotate = async_op(store.rotate)
    delete = async_op(store.delete)
