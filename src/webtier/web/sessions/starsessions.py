"""A starsessions store on webtier, for apps already on starsessions::

    from starsessions import SessionMiddleware
    from webtier.web.sessions.starsessions import Store

    app.add_middleware(SessionMiddleware, store=Store(async_tier))

starsessions hands its store the whole session as opaque bytes (serialized,
maybe encrypted), so the store keeps them as one blob in
``tier.session_store`` (:mod:`webtier.sessions.store`), with its expiry in
Redis; the session is in webtier's capped store and cleaner. For only the
changed keys to be written, use webtier's own ASGI middleware with
``scope_session=True``, which fills ``request.session`` too.

Ids: a write keeps the id it is given when a session of that id is stored;
otherwise (a new session, or an id from a cookie that no session has) it
stores the session under a new id of webtier's and returns it, as
starsessions' interface allows, so an id an attacker chose never becomes
a session. Ids that are not 16-128 URL-safe characters read as empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starsessions.stores.base import SessionStore

from webtier.errors import ConfigError, ServerError
from webtier.sessions import is_token, new_token

if TYPE_CHECKING:
    from webtier.aio import WebTier as AsyncWebTier

_CREATE_ATTEMPTS = 5  # a fresh 256-bit id is never taken; this only bounds a broken RNG


class Store(SessionStore):
    """starsessions' ``SessionStore`` on an asyncio tier.

    ``browser_ttl``: how long a session-only session (``lifetime=0``, whose
    cookie lasts until the browser closes) is kept after its last write or
    read, in seconds; None: the tier's timeouts (its idle timeout, else its
    backstop)."""

    def __init__(self, tier: AsyncWebTier, *, browser_ttl: float | None = None) -> None:
        from webtier.aio import WebTier as AsyncWebTier

        if not isinstance(tier, AsyncWebTier):
            raise ConfigError(f"Store needs a webtier.AsyncWebTier, not {tier!r}")
        self.tier, self.browser_ttl = tier, browser_ttl

    async def read(self, session_id: str, lifetime: int) -> bytes:
        found = await self.tier.session_store.read(session_id)
        return b"" if found is None or found.blob is None else found.blob

    async def write(self, session_id: str, data: bytes, lifetime: int, ttl: int) -> str:
        expiry = self.browser_ttl if lifetime == 0 else max(1, ttl)
        sessions = self.tier.session_store
        stored = is_token(session_id, strict=False)
        if stored and await sessions.save(session_id, {}, expiry=expiry, blob=data):
            return session_id
        for _ in range(_CREATE_ATTEMPTS):
            fresh = new_token()
            if await sessions.create(fresh, expiry=expiry, blob=data):
                return fresh
        raise ServerError("could not find a free session id")  # pragma: no cover

    async def remove(self, session_id: str) -> None:
        await self.tier.session_store.delete(session_id)
