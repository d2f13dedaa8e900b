"""Django's session engine on webtier: :class:`SessionStore`, served as
``webtier.web.sessions.django.SessionStore`` (``SESSION_ENGINE =
"webtier.web.sessions.django"``; see that module)."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import auth
from django.contrib.sessions.backends.base import CreateError, SessionBase, UpdateError

from webtier.errors import ServerError
from webtier.sessions import new_token, store
from webtier.web.sessions.django import configured_tier

_CREATE_ATTEMPTS = 5  # a fresh 256-bit id is never taken; this only bounds a broken RNG


class SessionStore(SessionBase):  # type: ignore[misc]  # Django ships no types
    """Django's session engine on webtier (``SESSION_ENGINE =
    "webtier.web.sessions.django"``): see :mod:`webtier.web.sessions.django`."""

    _session_key: str | None  # SessionBase's property: the id, checked for form

    def __init__(self, session_key: str | None = None) -> None:
        super().__init__(session_key)
        # Each key's JSON as last read or saved: a save sends only the keys
        # whose JSON differs, so parallel requests keep each other's changes.
        self._saved: dict[str, str] = {}

    @property
    def _store(self) -> Any:
        return configured_tier().session_store

    def _get_new_session_key(self) -> str:
        return new_token()

    async def _aget_new_session_key(self) -> str:
        return new_token()

    def load(self) -> dict[str, Any]:
        found = self._store.read(self.session_key) if self.session_key else None
        if found is None:
            # Unknown, expired or of another form: a new session, never this id.
            self._session_key, self._saved = None, {}
            return {}
        self._saved = found.json
        return dict(found.data)

    def exists(self, session_key: str | None) -> bool:
        return bool(session_key) and bool(self._store.exists(session_key))

    def create(self) -> None:
        for _ in range(_CREATE_ATTEMPTS):
            self._session_key = self._get_new_session_key()
            try:
                self.save(must_create=True)
            except CreateError:
                continue
            self.modified = True
            return
        raise ServerError("could not find a free session id")  # pragma: no cover

    def save(self, must_create: bool = False) -> None:
        if self.session_key is None:
            return self.create()
        data = self._get_session(no_load=must_create)
        expiry, user = self.get_expiry_age(), _user(data)
        if must_create:
            if not self._store.create(self.session_key, data, expiry=expiry, user=user):
                raise CreateError
            self._saved = store.encoded(data)
            return None
        changed, removed, after = store.changes(self._saved, data)
        relisted = auth.SESSION_KEY in changed  # a login: listed among the user's
        saved = self._store.save(
            self.session_key, changed, removed, expiry=expiry, user=user, user_changed=relisted
        )
        if not saved:
            raise UpdateError  # deleted meanwhile (a logout): never resurrected
        self._saved = after
        return None

    def cycle_key(self) -> None:
        """A new key, the data kept, the old key dead at once (``auth.login``
        calls it): one atomic move in Redis (``tier.session_store.rotate``)
        where Django's backends create a copy and delete the original."""
        data = self._session
        # The user as stored: auth.login cycles the key before it sets its own.
        saved = self._saved.get(auth.SESSION_KEY)
        key, user = self.session_key, None if saved is None else str(json.loads(saved))
        moved = self._store.rotate(key, user=user) if key else None
        if moved is None:  # nothing stored yet: a new session with the data
            super().cycle_key()
            return
        self._session_key, self._session_cache, self.modified = moved, data, True

    async def acycle_key(self) -> None:
        await sync_to_async(self.cycle_key)()

    def delete(self, session_key: str | None = None) -> None:
        if session_key is None:
            if self.session_key is None:
                return
            session_key = self.session_key
        self._store.delete(session_key)

    @classmethod
    def clear_expired(cls) -> None:
        """Redis expires sessions itself; ``clearsessions`` runs one pass of
        the capped store's cleaner (the worker's "sessions" job)."""
        configured_tier().sessions.clean()


def _user(data: dict[str, Any]) -> str | None:
    """The logged-in user's id (``django.contrib.auth``'s session key), listed
    so that ``tier.sessions.of_user`` and ``revoke_all`` reach the session."""
    user = data.get(auth.SESSION_KEY)
    return None if user is None else str(user)
