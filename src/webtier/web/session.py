"""The session a handler gets from the session middlewares.

:class:`Session` (WSGI, Django: over a sync ``WebTier``) and
:class:`AsyncSession` (ASGI: over an ``AsyncWebTier``, every method a
coroutine) have the same methods; their logic is written once, in
:mod:`webtier.web._sessions`. Reads of an anonymous visitor answer empty and
cost no Redis call beyond the first lookup of the cookie; the first write
(``update``, ``set_cart``, ``record_view``, ``login``) creates the session
and sends its cookie.

The middlewares' options are the fields of :class:`SessionOptions`; a login
or logout too late to change the cookie raises :class:`LateCookie`.
"""

from __future__ import annotations

from typing import Any

from webtier.errors import LateCookie
from webtier.web import _sessions as flows
from webtier.web._sessions import (
    SESSION_KEY,
    SessionOptions,
    SessionState,
    async_method,
    sync_method,
)

__all__ = ["SESSION_KEY", "AsyncSession", "LateCookie", "Session", "SessionOptions"]


class Session:
    """One request's session on a sync tier."""

    def __init__(self, tier: Any, state: SessionState) -> None:
        self._tier, self._state = tier, state

    user = sync_method(flows.user)
    data = sync_method(flows.data)
    get = sync_method(flows.get)
    update = sync_method(flows.update)
    discard = sync_method(flows.discard)
    recently_viewed = sync_method(flows.recently_viewed)
    record_view = sync_method(flows.record_view)
    cart = sync_method(flows.cart)
    set_cart = sync_method(flows.set_cart)
    clear_cart = sync_method(flows.clear_cart)
    login = sync_method(flows.login)
    logout = sync_method(flows.logout)


class AsyncSession:
    """One request's session on an asyncio tier: the methods of
    :class:`Session`, each returning a coroutine."""

    def __init__(self, tier: Any, state: SessionState) -> None:
        self._tier, self._state = tier, state

    user = async_method(flows.user)
    data = async_method(flows.data)
    get = async_method(flows.get)
    update = async_method(flows.update)
    discard = async_method(flows.discard)
    recently_viewed = async_method(flows.recently_viewed)
    record_view = async_method(flows.record_view)
    cart = async_method(flows.cart)
    set_cart = async_method(flows.set_cart)
    clear_cart = async_method(flows.clear_cart)
    login = async_method(flows.login)
    logout = async_method(flows.logout)
