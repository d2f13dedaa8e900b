"""Flask's ``flask.session`` on webtier: :class:`SessionInterface`, served
as ``webtier.web.sessions.flask.SessionInterface`` (see that module)::

    app.session_interface = webtier.web.sessions.flask.SessionInterface(tier)

The cookie holds the session's id (256 random bits); the data is in
``tier.session_store`` (:mod:`webtier.sessions.store`), JSON by key. A
response saves only the keys the request changed or removed (nested values
changed in place included, found by comparing their JSON), so parallel
requests changing different keys both keep their change; a request that
changed nothing writes nothing. A session ended meanwhile (a logout
elsewhere, "log out everywhere") is never brought back by a save.

While Redis is unreachable, a request is served as anonymous, and one that
writes its session gets a 503 (never Flask's 500 page).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from flask import Flask, Request, Response, after_this_request, has_request_context
from flask.sessions import SessionInterface as FlaskSessionInterface
from flask.sessions import SessionMixin
from werkzeug.datastructures import CallbackDict

from webtier._core.deadline import time_limit
from webtier.errors import ConfigError, RedisUnavailable, ServerError
from webtier.sessions import new_token, store
from webtier.sync import WebTier
from webtier.web.sessions.options import SessionOptions
from webtier.web.sessions.outage import UNAVAILABLE_BODY, outage_log, unavailable_headers

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_keys, dict_values

_CREATE_ATTEMPTS = 5  # a fresh 256-bit id is never taken; this only bounds a broken RNG

# flask-login's after-request hook looks for its remember-me flag in the
# session of every request, after the page is made; the flag only ever sets
# or clears a cookie (and a response that sets one is never stored). That
# look alone leaves the response free of the session: no Vary, no cookie
# refresh, so the page cache may keep the page (with it, every page of an
# app using flask-login varied on Cookie).
AFTER_VIEW_KEYS = frozenset({"_remember"})


class FlaskSession(CallbackDict[str, Any], SessionMixin):
    """``flask.session``: a dict that knows what was stored of it."""

    def __init__(
        self,
        data: dict[str, Any] | None = None,
        sid: str | None = None,
        *,
        permanent: bool,
        saved: dict[str, str] | None = None,
    ) -> None:
        def changed(session: FlaskSession) -> None:
            session.modified = session.accessed = True

        super().__init__(data, changed)
        self.sid = sid  # None until the first save creates the session
        self.unavailable: RedisUnavailable | None = None  # served as anonymous: Redis away
        # Each key's JSON as read or last saved: a save sends what differs.
        self.saved = store.encoded(data or {}) if saved is None else saved
        if data is None:
            self.permanent = permanent
        # Unchanged and unread so far (SessionMixin's defaults say True): a
        # request that neither reads nor writes its session sets no cookie
        # and no Vary, so its page may be cached.
        self.modified = self.accessed = False
        # Set as the view's response goes to the after-request hooks
        # (view_ended): whether the view read the session, and the keys
        # the hooks read after it ("" for the whole session).
        self.view_over = self.read_in_view = False
        self.read_after: set[str] = set()

    def view_ended(self, response: Response) -> Response:
        """Registered with ``flask.after_this_request`` by the interface, so
        it runs before the app's after-request hooks: the page is made."""
        self.view_over, self.read_in_view = True, self.accessed
        return response

    @property
    def used(self) -> bool:
        """Whether the response depends on the session: it was changed, or
        read by the view, or read after it for more than flask-login's look
        for its remember-me flag (see :data:`AFTER_VIEW_KEYS`)."""
        if not self.view_over:  # opened outside a request's dispatch
            return self.accessed or self.modified
        return self.read_in_view or self.modified or bool(self.read_after - AFTER_VIEW_KEYS)

    def _read(self, key: object = "") -> None:
        self.accessed = True
        if self.view_over:
            self.read_after.add(key if isinstance(key, str) else "")

    # Every read marks the session accessed (the response then varies on
    # Cookie, and the page cache never stores it), not only the three
    # Flask's own session marks: a page may show `"cart" in session` or
    # `session.items()` as well. (Flask 3.1 marks any use of flask.session.)
    def __getitem__(self, key: str) -> Any:
        self._read(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._read(key)
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self._read()
        return super().__iter__()

    def __len__(self) -> int:
        self._read()
        return super().__len__()

    def keys(self) -> dict_keys[str, Any]:
        self._read()
        return super().keys()

    def values(self) -> dict_values[str, Any]:
        self._read()
        return super().values()

    def items(self) -> dict_items[str, Any]:
        self._read()
        return super().items()

    def copy(self) -> dict[str, Any]:
        self._read()
        return dict(super().items())

    def get(self, key: str, default: Any = None) -> Any:
        self._read(key)
        return super().get(key, default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._read(key)
        return super().setdefault(key, default)

    def __bool__(self) -> bool:
        self._read()
        return bool(super().keys() - {"_permanent"})


class SessionInterface(FlaskSessionInterface):
    """``flask.session`` kept in webtier, for every request of the app.

    ``permanent``: whether new sessions are permanent (their cookie lasts
    ``PERMANENT_SESSION_LIFETIME``) or browser sessions (no ``Expires``);
    ``None`` reads the app's ``SESSION_PERMANENT`` (True if unset, as
    Flask-Session). Either way the stored session expires
    ``PERMANENT_SESSION_LIFETIME`` after its last save or read, in Redis.
    ``user_key``: the session key holding the logged-in user's id
    (flask-login's by default), listed so that ``tier.sessions.of_user``
    and ``revoke_all`` reach the user's sessions.
    ``options``: the 503's ``retry_after``, ``time_limit`` and ``log_every``
    of :class:`~webtier.web.sessions.SessionOptions` (its cookie settings
    are Flask's own, ``SESSION_COOKIE_*``).
    """

    session_class = FlaskSession

    def __init__(
        self,
        tier: WebTier,
        *,
        permanent: bool | None = None,
        user_key: str = "_user_id",
        options: SessionOptions | None = None,
    ) -> None:
        if not isinstance(tier, WebTier):
            raise ConfigError(f"SessionInterface needs a webtier.WebTier, not {tier!r}")
        self.tier, self.permanent, self.user_key = tier, permanent, user_key
        self.options = options or SessionOptions()  # its retry_after and log_every
        self.outages = outage_log(self.options.log_every)

    def _permanent(self, app: Flask) -> bool:
        if self.permanent is not None:
            return self.permanent
        return bool(app.config.get("SESSION_PERMANENT", True))

    def open_session(self, app: Flask, request: Request) -> FlaskSession:
        sid = request.cookies.get(self.get_cookie_name(app))
        # An unknown, expired or forged id reads as missing: a new session,
        # under a new id (never the one the cookie offered) once it is saved.
        try:
            with time_limit(self.options.time_limit):
                found = self.tier.session_store.read(sid) if sid else None
        except RedisUnavailable as error:
            # Served as anonymous; a request that writes gets a 503 (save_session).
            self.outages.failed(error, "served as anonymous")
            session = FlaskSession(sid=None, permanent=self._permanent(app))
            session.unavailable = error
            return self._watched(session)
        if found is None:
            return self._watched(FlaskSession(sid=None, permanent=self._permanent(app)))
        session = FlaskSession(found.data, sid, permanent=self._permanent(app), saved=found.json)
        return self._watched(session)

    @staticmethod
    def _watched(session: FlaskSession) -> FlaskSession:
        """``session``, told when the view's response is made (first of the
        request's after-request work: ``after_this_request`` runs before the
        app's hooks)."""
        if has_request_context():
            after_this_request(session.view_ended)
        return session

    def regenerate(self, session: FlaskSession) -> None:
        """A new id for ``session``, its data kept, the old id dead at once:
        call it at login (``app.session_interface.regenerate(flask.session)``)."""
        saved = session.saved.get(self.user_key)  # the user as stored
        user = None if saved is None else str(json.loads(saved))
        moved = self.tier.session_store.rotate(session.sid, user=user) if session.sid else None
        if moved is None:  # nothing stored yet: saved under a new id
            session.sid, session.saved = None, {}
        else:  # one atomic move in Redis
            session.sid = moved
        session.modified = True

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        if not isinstance(session, FlaskSession):  # another interface's, or a null session
            return
        if session.used:
            response.vary.add("Cookie")
        if session.unavailable is not None:
            if session.modified:  # its writes cannot be kept
                self._unavailable(response, session.unavailable)
            return
        try:
            with time_limit(self.options.time_limit):
                self._save(app, session, response)
        except RedisUnavailable as error:
            self._unavailable(response, error)

    def _unavailable(self, response: Response, error: RedisUnavailable) -> None:
        """Turns the response into the 503 every webtier adapter answers
        while Redis is away: never Flask's 500 page."""
        self.outages.failed(error, "answered 503")
        response.status_code = 503
        response.set_data(UNAVAILABLE_BODY)
        response.headers.pop("Set-Cookie", None)
        for name, value in unavailable_headers(self.options):
            response.headers[name] = value

    def _save(self, app: Flask, session: FlaskSession, response: Response) -> None:
        name, domain = self.get_cookie_name(app), self.get_cookie_domain(app)
        path = self.get_cookie_path(app)
        used = session.used  # by the request: the reads below mark it
        if not session:
            if session.modified and session.sid is not None:  # emptied: ended
                self.tier.session_store.delete(session.sid)
                response.delete_cookie(name, domain=domain, path=path)
                response.vary.add("Cookie")
            return
        if not used:
            return  # nothing read, nothing written: the read already touched it
        data = dict(session)
        expiry = app.permanent_session_lifetime.total_seconds()
        user = None if data.get(self.user_key) is None else str(data[self.user_key])
        if session.sid is None:
            session.sid = self._create(data, expiry, user)
            session.saved = store.encoded(data)
        else:
            changed, removed, after = store.changes(session.saved, data)
            relisted = self.user_key in changed  # a login: listed among the user's
            if (changed or removed) and not self.tier.session_store.save(
                session.sid, changed, removed, expiry=expiry, user=user, user_changed=relisted
            ):
                # Ended meanwhile: a save must not bring it (and its user) back.
                response.delete_cookie(name, domain=domain, path=path)
                return
            session.saved = after
        if session.modified or self.should_set_cookie(app, session):
            response.set_cookie(
                name,
                session.sid,
                expires=self.get_expiration_time(app, session),
                httponly=self.get_cookie_httponly(app),
                domain=domain,
                path=path,
                secure=self.get_cookie_secure(app),
                samesite=self.get_cookie_samesite(app),
                partitioned=self.get_cookie_partitioned(app),
            )
            response.vary.add("Cookie")

    def _create(self, data: dict[str, Any], expiry: float, user: str | None) -> str:
        for _ in range(_CREATE_ATTEMPTS):
            sid = new_token()
            if self.tier.session_store.create(sid, data, expiry=expiry, user=user):
                return sid
        raise ServerError("could not find a free session id")  # pragma: no cover
