"""The session a handler gets from the session middlewares on an asyncio
tier (the ASGI adapter): :class:`AsyncSession`, each method a coroutine.
:mod:`webtier.web.sessions.sync` is generated from this module
(scripts/unasync.py).

Each method runs one flow of
:mod:`webtier.web.sessions.flows` on this request's state, through the
tier's own transport, as the tier runs any operation. Reads of an anonymous
visitor answer empty and cost no Redis call beyond the first lookup of the
cookie; the first write (``update``, ``set_cart``, ``record_view``,
``login``) creates the session and sends its cookie. A login or logout too
late to change the cookie raises :class:`~webtier.errors.LateCookie`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from webtier.sessions.tokens import CartPolicy
from webtier.types import LoginResult
from webtier.web.sessions import flows
from webtier.web.sessions.state import SessionState

if TYPE_CHECKING:
    from webtier.aio import WebTier as AsyncWebTier


class AsyncSession:
    """One request's session on an asyncio tier (each method a coroutine)."""

    def __init__(self, tier: AsyncWebTier, state: SessionState) -> None:
        self._run, self._config, self._state = tier.transport.run, tier.config, state

    @property
    def state(self) -> SessionState:
        """This request's view of its session (its token, whether it was
        read): what the page cache's holes need of it."""
        return self._state

    async def user(self) -> str | None:
        """The logged-in user, or None (anonymous, or no session)."""
        return await self._run(flows.user(self._config, self._state))

    async def session_id(self) -> str | None:
        """The session's public id (as ``tier.sessions.of_user`` lists it,
        never the token), or None when there is no session."""
        return await self._run(flows.session_id(self._config, self._state))

    async def data(self) -> dict[str, Any]:
        return await self._run(flows.data(self._config, self._state))

    async def get(self, name: str, default: Any = None) -> Any:
        return await self._run(flows.get(self._config, self._state, name, default))

    async def pop(self, name: str, default: Any = None) -> Any:
        """The value of ``name`` (``default`` without one), removed from the
        session: a message shown once. As the request's first read, the
        removal rides in the session's load (one round trip for both)."""
        return await self._run(flows.pop(self._config, self._state, name, default))

    async def update(self, values: Mapping[str, Any]) -> None:
        await self._run(flows.update(self._config, self._state, values))

    async def discard(self, *names: str) -> None:
        await self._run(flows.discard(self._config, self._state, *names))

    async def recently_viewed(self) -> list[str]:
        return await self._run(flows.recently_viewed(self._config, self._state))

    async def record_view(self, item: str) -> None:
        """Recently viewed and the ranking's count, in one round trip."""
        await self._run(flows.record_view(self._config, self._state, item))

    async def cart(self) -> dict[str, int]:
        return await self._run(flows.cart(self._config, self._state))

    async def set_cart(self, item: str, count: int) -> None:
        """Sets the count of ``item`` in the cart (0 or less removes it)."""
        await self._run(flows.set_cart(self._config, self._state, item, count))

    async def clear_cart(self) -> None:
        await self._run(flows.clear_cart(self._config, self._state))

    async def login(self, user: str, cart_policy: CartPolicy = "add") -> LoginResult | None:
        """Logs ``user`` in under a new token (see :func:`flows.login`)."""
        return await self._run(flows.login(self._config, self._state, user, cart_policy))

    async def logout(self) -> None:
        """Ends the session in Redis and clears the cookie."""
        await self._run(flows.logout(self._config, self._state))
