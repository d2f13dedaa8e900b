# Generated from src/webtier/web/sessions/aio.py by scripts/unasync.py: do not edit.
"""The session a handler gets from the session middlewares on a sync tier
(the WSGI, Flask and Django adapters): :class:`Session`. It is generated
from :mod:`webtier.web.sessions.aio` (scripts/unasync.py).

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
    from webtier.sync import WebTier


class Session:
    """One request's session on a sync tier."""

    def __init__(self, tier: WebTier, state: SessionState) -> None:
        self._run, self._config, self._state = tier.transport.run, tier.config, state

    @property
    def state(self) -> SessionState:
        """This request's view of its session (its token, whether it was
        read): what the page cache's holes need of it."""
        return self._state

    def user(self) -> str | None:
        """The logged-in user, or None (anonymous, or no session)."""
        return self._run(flows.user(self._config, self._state))

    def session_id(self) -> str | None:
        """The session's public id (as ``tier.sessions.of_user`` lists it,
        never the token), or None when there is no session."""
        return self._run(flows.session_id(self._config, self._state))

    def data(self) -> dict[str, Any]:
        return self._run(flows.data(self._config, self._state))

    def get(self, name: str, default: Any = None) -> Any:
        return self._run(flows.get(self._config, self._state, name, default))

    def pop(self, name: str, default: Any = None) -> Any:
        """The value of ``name`` (``default`` without one), removed from the
        session: a message shown once. As the request's first read, the
        removal rides in the session's load (one round trip for both)."""
        return self._run(flows.pop(self._config, self._state, name, default))

    def update(self, values: Mapping[str, Any]) -> None:
        self._run(flows.update(self._config, self._state, values))

    def discard(self, *names: str) -> None:
        self._run(flows.discard(self._config, self._state, *names))

    def recently_viewed(self) -> list[str]:
        return self._run(flows.recently_viewed(self._config, self._state))

    def record_view(self, item: str) -> None:
        """Recently viewed and the ranking's count, in one round trip."""
        self._run(flows.record_view(self._config, self._state, item))

    def cart(self) -> dict[str, int]:
        return self._run(flows.cart(self._config, self._state))

    def set_cart(self, item: str, count: int) -> None:
        """Sets the count of ``item`` in the cart (0 or less removes it)."""
        self._run(flows.set_cart(self._config, self._state, item, count))

    def clear_cart(self) -> None:
        self._run(flows.clear_cart(self._config, self._state))

    def login(self, user: str, cart_policy: CartPolicy = "add") -> LoginResult | None:
        """Logs ``user`` in under a new token (see :func:`flows.login`)."""
        return self._run(flows.login(self._config, self._state, user, cart_policy))

    def logout(self) -> None:
        """Ends the session in Redis and clears the cookie."""
        self._run(flows.logout(self._config, self._state))
