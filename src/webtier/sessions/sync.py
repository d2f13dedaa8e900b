# Generated from src/webtier/sessions/aio.py by scripts/unasync.py: do not edit.
"""The sessions' and carts' sync API: the ``tier.sessions`` and
``tier.carts`` parts. It is generated from :mod:`webtier.sessions.aio` (scripts/unasync.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webtier._core.facade import Part, sync_op
from webtier._core.protocol import Op
from webtier.config import Config
from webtier.ranking.views import ViewCounter
from webtier.sessions import carts, cleaner, ops, store, users


class Sessions(Part):
    """Login sessions with recently viewed items (Redis in Action 2.1): see docs/sessions.md."""

    new = sync_op(ops.new)
    check = sync_op(ops.check)
    info = sync_op(ops.info)
    login = sync_op(users.login)
    logout = sync_op(users.logout)
    of_user = sync_op(users.of_user)
    revoke = sync_op(users.revoke)
    revoke_all = sync_op(users.revoke_all)
    data = sync_op(ops.data)
    update = sync_op(ops.update)
    discard = sync_op(ops.discard)
    recently_viewed = sync_op(ops.recently_viewed)
    clean = sync_op(cleaner.clean)
    stats = sync_op(ops.stats)

    def __init__(
        self,
        run: Callable[[Op[Any]], Any],
        config: Config,
        views: ViewCounter | None = None,
    ) -> None:
        super().__init__(run, config)
        # How a touch counts its item view: the tier's (tier.ranking.views).
        self._views = views

    def touch(self, token: str, *, user: str | None = None, item: str | None = None) -> bool:
        """The book's ``update_token`` for a live session: last seen, the user
        (when given), the viewed ``item`` and its view count, in one round
        trip; ``False`` when there is no such session (strict mode never
        creates one)."""
        touched = ops.touch(self._config, token, user=user, item=item, views=self._views)
        result: bool = self._run(touched)
        return result


class Carts(Part):
    """Shopping carts, item -> count, per session (Redis in Action 2.2)."""

    set = sync_op(carts.set)
    get = sync_op(carts.get)
    clear = sync_op(carts.clear)


class SessionStore(Part):
    """Sessions under ids a web framework picks, for its own session
    interface (Django's ``SessionStore``, Flask's, starsessions'): see
    :mod:`webtier.sessions.store` and docs/sessions-middleware.md."""

    read = sync_op(store.read_session)
    exists = sync_op(store.exists)
    create = sync_op(store.create)
    save = sync_op(store.save)
    rotate = sync_op(store.rotate)
    delete = sync_op(store.delete)
