"""Sessions kept for a web framework's own session interface (Django's
``SessionStore``, Flask's ``SessionInterface``, a starsessions store): the
framework picks the id and reads and writes whole sessions, as its
interface says; webtier keeps them in the same hashes, shards, recency
index and cleaner as its own sessions.

What the interfaces need beyond webtier's own sessions:

* ids of the non-strict form (16-128 URL-safe characters, the frameworks'
  own); an id of any other form reads as missing, with nothing sent, since
  it comes from a cookie (webtier's own cookie keeps its strict tokens);
* data as JSON values, one hash field per key (``d<name>``), so a save
  sends only the keys the request changed or removed, and two parallel
  requests that change different keys both keep their change; or one
  opaque blob (``b``) for an interface that hands over bytes;
* an expiry per session (seconds, ``x`` in ms), an idle timeout of its own
  that Redis enforces, never longer than the tier's idle timeout and
  never past its absolute one;
* create-only saves (``False`` when the id exists) and update-only saves
  (``False`` when the session was deleted or expired meanwhile, which a
  save must never resurrect); limits from :class:`~webtier.config.SessionSettings`;
* the session's user (its framework's logged-in user id), listed in the
  user's index as webtier's own sessions are, so ``tier.sessions.of_user``
  lists a user's sessions of every framework and ``revoke``/``revoke_all``
  end them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webtier._core.checks import check_real
from webtier._core.keys import check_name
from webtier._core.protocol import Arg, Op, ScriptCall, read, write
from webtier.config import Config
from webtier.errors import DataTooLarge, InvalidInput
from webtier.sessions import ops, users
from webtier.sessions.layout import ROTATE, SAVE, Place, timeouts
from webtier.sessions.ops import _indexed_first
from webtier.sessions.tokens import is_token, new_session_id
from webtier.types import StoredSession


def place_of(cfg: Config, session_id: object) -> Place | None:
    """Where the session of ``session_id`` lives, or None for an id of
    another form (which no session has: it reads as missing)."""
    return Place(cfg, session_id) if is_token(session_id, strict=False) else None  # type: ignore[arg-type]


def encoded(data: Mapping[str, Any]) -> dict[str, str]:
    """Each value of ``data`` as JSON, as a save stores it: what a framework
    keeps of the session it read, to send only the keys that differ."""
    return {name: ops.encode_value(name, value) for name, value in data.items()}


def changes(
    before: Mapping[str, str], data: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """What a save of ``data`` sends when the session held ``before`` (JSON
    by key, :func:`encoded`): the keys set to a different value, the keys
    removed, and ``data`` :func:`encoded` (what the session holds once the
    save is done: each value is encoded once a request)."""
    after = encoded(data)
    changed = {name: data[name] for name, json in after.items() if before.get(name) != json}
    return changed, [name for name in before if name not in data], after


def read_session(
    cfg: Config, session_id: str, refresh_after: float = 60.0
) -> Op[StoredSession | None]:
    """The session, or None when none is live under ``session_id`` (an id of
    another form included: nothing is sent). One round trip, and a second
    that touches a session last seen ``refresh_after`` seconds ago or more."""
    where = place_of(cfg, session_id)
    if where is None:
        return None
    fields = yield from ops.load_at(cfg, where, refresh_after)
    if fields is None:
        return None
    json = ops.json_of(fields)
    return StoredSession(ops.decoded(json), fields.get("b"), json)


def exists(cfg: Config, session_id: str) -> Op[bool]:
    """Whether a session is live under ``session_id``."""
    where = place_of(cfg, session_id)
    if where is None:
        return False
    (found,) = yield read(where.route, ("EXISTS", where.key))
    return int(found) == 1


def create(
    cfg: Config,
    session_id: str,
    data: Mapping[str, Any] | None = None,
    *,
    expiry: float | None = None,
    blob: bytes | None = None,
    user: str | None = None,
) -> Op[bool]:
    """Store a new session under ``session_id`` that expires after
    ``expiry`` seconds without a save or a read (None: the tier's
    timeouts); ``False`` (nothing written)
    when the id is taken. An expiry of 0 or less stores nothing: the session
    is over as it begins. Never re-sent after a lost reply (a second try
    would find its own session and answer ``False``): that raises
    :class:`~webtier.errors.OutcomeUnknown`."""
    where = _checked(cfg, session_id)
    if data is not None and not isinstance(data, Mapping):
        raise InvalidInput("data", "must be a mapping of names to JSON values", data)
    return (yield from _save(cfg, where, "create", dict(data or {}), (), expiry, blob, user, user))


def save(
    cfg: Config,
    session_id: str,
    changed: Mapping[str, Any],
    removed: Iterable[str] = (),
    *,
    expiry: float | None = None,
    blob: bytes | None = None,
    user: str | None = None,
    user_changed: bool = True,
) -> Op[bool]:
    """Set the ``changed`` keys, remove the ``removed`` ones, and set the
    session's expiry (seconds; 0 or less deletes it; None: as it was); ``False`` (nothing
    written) when no session is live under ``session_id``: one deleted or
    expired meanwhile is never brought back. ``user``: the session's user
    (None: anonymous); ``user_changed=False`` when the caller read it so,
    and the user's index, which lists the session already, is not written
    again (one round trip less on Cluster, where it is in another slot)."""
    where = _checked(cfg, session_id)
    if isinstance(removed, str) or not isinstance(removed, Iterable):
        raise InvalidInput("removed", "must be a list of names", removed)
    if not isinstance(changed, Mapping):
        raise InvalidInput("changed", "must be a mapping of names to JSON values", changed)
    listed = user if user_changed else None
    update = (dict(changed), tuple(removed), expiry, blob, user, listed)
    return (yield from _save(cfg, where, "update", *update))


def rotate(cfg: Config, session_id: str, *, user: str | None = None) -> Op[str | None]:
    """Move the session to a new id and return it (None when no session is
    live under ``session_id``): atomically, so the old id is dead the moment
    the new one exists (session fixation defence, at login); data, cart,
    viewed items and expiry move with it. The new id is drawn in the old
    one's shard, so the move is one script on Cluster too. Never re-sent
    after a lost reply (:class:`~webtier.errors.OutcomeUnknown`). ``user``:
    the session's user, as saved (the new id is listed among the user's
    sessions first); a session of another user is refused."""
    where = place_of(cfg, session_id)
    if where is None:
        return None
    if user is not None:
        check_name("user", user)
    _, _, backstop, lateness = timeouts(cfg.sessions)
    while True:
        fresh = Place(cfg, users.token_in_shard(cfg, where.shard))
        args = (where.token, fresh.token, backstop + lateness, user or "")
        call = ScriptCall(ROTATE, (where.key, fresh.key, where.recent), args)
        moving = write(where.route, call, idempotent=False)
        (moved,) = (yield _indexed_first(cfg, user, fresh.token, moving))[-1]
        if int(moved) == 1:
            return fresh.token
        if int(moved) == 0:
            return None
        if int(moved) == -2:
            raise InvalidInput("user", "is not the session's user", user)


def delete(cfg: Config, session_id: str) -> Op[bool]:
    """End the session (its data, cart and viewed items); ``False`` when
    there was none."""
    where = place_of(cfg, session_id)
    if where is None:
        return False
    (user,) = yield from users.end_sessions(cfg, [where])
    return user is not None


def _checked(cfg: Config, session_id: object) -> Place:
    where = place_of(cfg, session_id)
    if where is None:
        form = "is not a session id (16-128 URL-safe characters)"
        raise InvalidInput("session_id", form, session_id)
    return where


def _save(
    cfg: Config,
    where: Place,
    mode: str,
    changed: dict[str, Any],
    removed: tuple[str, ...],
    expiry: float | None,
    blob: bytes | None,
    user: str | None,
    listed: str | None,
) -> Op[bool]:
    settings = cfg.sessions
    if user is not None:
        check_name("user", user)
    if expiry is not None:
        expiry = check_real("expiry", expiry, what="a number of seconds")
    if blob is not None and not isinstance(blob, bytes):
        raise InvalidInput("blob", "must be bytes", blob)
    pairs: list[Arg] = []
    for name, value in changed.items():
        check_name("data", name)
        pairs += [name, ops.encode_value(name, value, settings)]
    for name in removed:
        check_name("removed", name)

    if expiry is not None and expiry <= 0:
        if mode == "create":
            return True  # over as it begins: nothing to store
        return (yield from delete(cfg, where.token))
    idle, absolute, backstop, lateness = timeouts(settings)
    own = 0 if expiry is None else min(max(1, round(expiry * 1000)), backstop)
    args: tuple[Arg, ...] = (
        where.token,
        mode,
        own,
        idle,
        absolute,
        backstop,
        lateness,
        settings.max_fields,
        settings.max_data_bytes,
        new_session_id() if mode == "create" else "",  # the public id of a created session
        user or "",
        "0" if blob is None else "1",
        b"" if blob is None else blob,
        len(removed),
        *removed,
        *pairs,
    )
    call = ScriptCall(SAVE, (where.key, where.recent), args)
    # An update sent twice writes the same values twice; a create sent twice
    # would find its own session and answer "taken".
    saving = write(where.route, call, idempotent=mode == "update")
    # The user's index lists the session before the session names the user
    # (docs/sessions.md), so revoke_all finds every session of theirs.
    (reply,) = (yield _indexed_first(cfg, listed, where.token, saving))[-1]
    status = int(reply[0])
    if status == -1:
        raise DataTooLarge(
            "data",
            f"the session would hold {int(reply[1])} fields, {int(reply[2])} bytes "
            f"(limits: {settings.max_fields} fields, {settings.max_data_bytes} bytes)",
        )
    return status == 1
