"""Create, check and touch a session; its data and viewed items."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any

from webtier import ranking
from webtier._core.keys import check_name
from webtier._core.protocol import (
    Arg,
    Chain,
    Op,
    Reply,
    Request,
    ScriptCall,
    pairs,
    read,
    text,
    write,
)
from webtier.config import Config, SessionSettings
from webtier.errors import (
    DataTooLarge,
    InvalidInput,
    OutcomeUnknown,
    PartiallyApplied,
    ServerError,
    UnknownSession,
    UserMismatch,
    WebtierError,
)
from webtier.sessions.layout import (
    _NEW_ATTEMPTS,
    LOAD,
    TOUCH,
    UPDATE,
    Place,
    ViewCounting,
    _user,
    fields_of,
    index_user,
    named,
    place,
    timeouts,
)
from webtier.sessions.tokens import new_session_id, new_token
from webtier.types import SessionInfo, SessionStats

# -- create, check, touch -------------------------------------------------------------------


def touch_request(
    cfg: Config,
    where: Place,
    mode: str,
    user: str | None,
    item: str | None,
    sid: str = "",
    *,
    count_view: bool = False,
) -> Request:
    """The touch script's call; with ``count_view``, the script also counts
    the item's view in the item's shard of the ranking if the session is
    live (one server only: the ranking is in other slots)."""
    settings = cfg.sessions
    args = (where.token, mode, sid, user or "", item or "", settings.viewed, *timeouts(settings))
    keys: tuple[str, ...] = (where.key, where.recent)
    if count_view and item is not None:
        keys += (ranking.ops.shard_for(cfg, item).viewed,)
    return write(where.route, ScriptCall(TOUCH, keys, args), idempotent=False)


def _indexed_first(cfg: Config, user: str | None, token: str, *requests: Request) -> Chain:
    """``requests`` after the entry listing ``token`` among ``user``'s
    sessions: the entry alone is harmless (readers drop entries of sessions
    that are not the user's), a session of a user missing from the index
    would escape ``revoke_all``; so the entry goes first, on Cluster too."""
    if user is None:
        return Chain(requests)
    return Chain((index_user(cfg, user, token), *requests))


def new(cfg: Config, user: str | None = None) -> Op[str]:
    """Create a session and return its token (256 random bits, URL-safe),
    anonymous or ``user``'s. One round trip (two on Cluster with a user)."""
    if user is not None:
        check_name("user", user)
    for _ in range(_NEW_ATTEMPTS):
        token = new_token()
        where = Place(cfg, token)
        created = touch_request(cfg, where, "new", user, None, new_session_id())
        replies = yield _indexed_first(cfg, user, token, created)
        if int(replies[-1][0][0]) == 1:
            return token
    raise ServerError("could not find a free session token")  # pragma: no cover


def check(cfg: Config, token: str) -> Op[str | None]:
    """The user of the session (the book's ``check_token``): ``None`` when
    it is anonymous or there is no live session. One round trip."""
    where = place(cfg, token)
    (user,) = yield read(where.route, ("HGET", where.key, "u"))
    return _user(user)


def _info(created: Reply, sid: Reply, user: Reply, score: Reply) -> SessionInfo | None:
    if created is None or sid is None:
        return None
    seen = float(score) / 1e6 if score is not None else int(created) / 1000
    return SessionInfo(text(sid), _user(user), int(created) / 1000, seen)


def _info_commands(where: Place) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return ("HMGET", where.key, "c", "i", "u"), ("ZSCORE", where.recent, where.token)


def info(cfg: Config, token: str) -> Op[SessionInfo | None]:
    """The session's public id, user, created and last-seen times (seconds
    since the epoch, server clock); ``None`` when there is no live session."""
    where = place(cfg, token)
    (created, sid, user), score = yield read(where.route, *_info_commands(where))
    return _info(created, sid, user, score)


def load(
    cfg: Config, token: str, refresh_after: float, *, taking: Sequence[str] = ()
) -> Op[dict[str, bytes] | None]:
    """The session's whole hash, for a request that reads it many times
    (``data_of``, ``cart_of``, ``viewed_of`` decode it); ``None`` when there
    is no live session. One round trip; a session last seen ``refresh_after``
    seconds ago or more is touched too (last seen and expiry: no user, no
    item), in a second one (with ``refresh_after=0``, every load touches, in
    the first). A hash is a cart and a few fields, so the whole of it costs
    less than a second call for what the request reads later.

    ``taking``: data names removed from the session as it is read, in the
    same round trip (a message shown once); the hash returned still holds
    them. A load sent again after its reply was lost finds them gone: a
    value taken is shown at most once, never twice."""
    return (yield from load_at(cfg, place(cfg, token), refresh_after, taking=taking))


def load_at(
    cfg: Config, where: Place, refresh_after: float, *, taking: Sequence[str] = ()
) -> Op[dict[str, bytes] | None]:
    """:func:`load` of the session at ``where`` (its token already checked)."""
    settings = cfg.sessions
    refresh = max(0, round(refresh_after * 1000))
    args = (where.token, refresh, *timeouts(settings))
    call = ScriptCall(LOAD, (where.key, where.recent), args)
    # After the hash is read: a session's hash always holds its own fields
    # (c, i), so removing data never empties it.
    taken: tuple[tuple[str, ...], ...] = ()
    if taking:
        taken = (("HDEL", where.key, *(f"d{check_name('taking', name)}" for name in taking)),)
    # Sent twice, a load touches twice: the same state as once. Written to the
    # primary, replica reads or not: a replica may still hold a session ended.
    if refresh == 0:
        # Every read touches: the hash, then the script that checks the
        # session is live and touches it, in one round trip (session_load.lua
        # says why not one script).
        ((fields, *_, reply),) = yield (
            write(where.route, ("HGETALL", where.key), *taken, call, idempotent=True),
        )
        return fields_of(fields) if int(reply[0]) == 1 and fields else None
    # Most reads touch nothing (the session was seen less than `refresh` ms
    # ago): the hash, its last-seen score and the server's time say so with
    # plain commands, which cost Redis a fraction of a script's call. The
    # script runs, a round trip later, only when they say it has work: a
    # touch due, an index entry to list or forget, an absolute timeout past.
    # A session ended in between makes it answer 0: read as missing.
    ((fields, *_, seen, now),) = yield (
        write(
            where.route,
            ("HGETALL", where.key),
            *taken,
            ("ZSCORE", where.recent, where.token),
            ("TIME",),
            idempotent=True,
        ),
    )
    found = fields_of(fields)
    if not found and seen is None:
        return None
    if found and not _script_due(settings, found, seen, now, refresh):
        return found
    ((reply,),) = yield (write(where.route, call, idempotent=True),)
    return found if int(reply[0]) == 1 and found else None


def _script_due(
    settings: SessionSettings, fields: Mapping[str, bytes], seen: Reply, now: Reply, refresh: int
) -> bool:
    """Whether a live-looking session's load needs session_load.lua: the
    script's own tests, on the values read with the hash (server time, µs).
    Redis expired the key at its idle deadline, so what a key still alive can
    have passed is only an absolute timeout set or shortened since its last
    touch."""
    seconds, micros = now
    now_us = int(seconds) * 1_000_000 + int(micros)
    created = fields.get("c")
    if seen is None or created is None or now_us - float(seen) >= refresh * 1000:
        return True
    _, absolute, _ = settings.millis
    return absolute > 0 and int(created) + absolute <= now_us // 1000


def visit(
    cfg: Config,
    token: str,
    refresh_after: float,
    item: str | None = None,
    views: ViewCounting | None = None,
) -> Op[dict[str, bytes] | None]:
    """The session's whole hash for a page answered from the page cache,
    whose first round trip can go with the page's own (the asyncio layer
    joins them, :func:`webtier._core.protocol.together`); ``None`` when
    there is no live session. With ``item``, the page is that item's and
    the view is counted first, as :func:`touch` counts it (the session's
    recently viewed, and the ranking in the same round trip on a single
    server), so the hash read after it holds the view. Without, it is
    :func:`load`.

    On Cluster the ranking is in another slot: its count is a second round
    trip, and a failure of that count alone is dropped (the page was
    answered, the session touched), never retried."""
    where = place(cfg, token)
    if item is None:
        return (yield from load_at(cfg, where, refresh_after))
    check_name("item", item)
    inline = views is not None and views.inline
    touched = touch_request(cfg, where, "live", None, item, count_view=inline)
    upkeep = views.upkeep(item) if inline and views is not None else ()
    # One pipeline: the hash is read after the touch wrote the view.
    replies = yield (touched, read(where.route, ("HGETALL", where.key)), *upkeep)
    status = int(replies[0][0][0])
    if status != 1:  # no such session, or (-1) another user's: nothing written
        return None
    if not inline:
        counted = (
            views.requests(item) if views is not None else ranking.ops.view_requests(cfg, item)
        )
        if counted:
            # Lost alone, the view is not worth failing the answered page for.
            with contextlib.suppress(WebtierError):
                yield counted
    return fields_of(replies[1][0])


def touch(
    cfg: Config,
    token: str,
    *,
    user: str | None = None,
    item: str | None = None,
    views: ViewCounting | None = None,
) -> Op[bool]:
    """The book's ``update_token`` for a live session: last seen, the user
    (when given), the viewed ``item`` (kept among the newest ``viewed``) and
    the item's view count in the ranking, atomically per session. ``False``
    when there is no such session: in strict mode a touch never creates one
    (non-strict, it does, as the book does), and then no view is counted.

    One round trip on a single server, where the script counts the view
    itself; on Cluster the view goes to the ranking's node once the session
    is known live (a second round trip), and if that fails after the touch
    applied, :class:`~webtier.errors.PartiallyApplied` says so: the session
    was touched, the view not (or maybe) counted."""
    where = place(cfg, token)
    mode = "live" if cfg.sessions.strict else "any"
    if user is not None:
        check_name("user", user)
    if item is not None:
        check_name("item", item)
    sid = new_session_id() if mode == "any" else ""
    inline = item is not None and views is not None and views.inline
    touched = touch_request(cfg, where, mode, user, item, sid, count_view=inline)
    upkeep = views.upkeep(item) if inline and views is not None and item else ()
    replies = yield _indexed_first(cfg, user, where.token, touched, *upkeep)
    status, *rest = replies[-1 - len(upkeep)][0]
    if int(status) == -1:
        raise UserMismatch(f"the session belongs to {text(rest[0])!r}, not {user!r}: use login")
    live = int(status) == 1
    if live and item is not None and not inline:
        counted = (
            views.requests(item) if views is not None else ranking.ops.view_requests(cfg, item)
        )
        if counted:
            try:
                yield counted
            except WebtierError as error:
                lost = ("view",)
                unsure = isinstance(error, OutcomeUnknown)
                raise PartiallyApplied(
                    "touch", ("session",), () if unsure else lost, lost if unsure else ()
                ) from error
    return live


# -- session data and viewed items ----------------------------------------------------------


# One encoder for every value: json.dumps with options builds a new encoder per
# call, which cost more than the encoding of a session's usual small values.
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
# json.loads of bytes first guesses their encoding: values are UTF-8, as saved.
_DECODE = json.JSONDecoder().decode
_ATOMS: dict[object, str] = {True: "true", False: "false", None: "null"}  # their JSON


def data_of(fields: Mapping[str, bytes]) -> dict[str, Any]:
    """The data among a session's fields, decoded from JSON."""
    return decoded(json_of(fields))


def decoded(json: Mapping[str, str]) -> dict[str, Any]:
    """Data from the JSON of each key (:func:`json_of`)."""
    if not json:
        return {}
    # One parse of an array of every value: a decoder's call costs more than
    # parsing a session's usual small value. Each value is one JSON text, so
    # the array has one element per key (a corrupt value fails the zip).
    values = _DECODE(f"[{','.join(json.values())}]")
    return dict(zip(json, values, strict=True))


def json_of(fields: Mapping[str, bytes]) -> dict[str, str]:
    """The JSON of each data field among a session's fields, as stored."""
    return {name: value.decode() for name, value in named(fields, "d").items()}


def data(cfg: Config, token: str) -> Op[dict[str, Any]]:
    """The session's data, decoded from JSON ({} when there is no session)."""
    where = place(cfg, token)
    (reply,) = yield read(where.route, ("HGETALL", where.key))
    return data_of(fields_of(reply))


def encode_value(name: str, value: object, settings: SessionSettings | None = None) -> str:
    """``value`` as a session stores it: compact JSON, never NaN or pickle;
    with ``settings``, within their ``max_value_bytes``."""
    try:
        # The JSON of a string or an int is its one C call: most session
        # values, encoded once a key per request (store.changes).
        if isinstance(value, str):
            encoded: str = encode_basestring(value)
        elif value is None or value is True or value is False:
            encoded = _ATOMS[value]
        elif isinstance(value, int):
            encoded = int.__repr__(value)
        else:
            encoded = _ENCODE(value)
    except (TypeError, ValueError, RecursionError) as error:  # RecursionError: too deep
        raise InvalidInput(f"values[{name!r}]", f"is not JSON: {error}", value) from None
    if settings is not None and len(encoded.encode()) > settings.max_value_bytes:
        raise DataTooLarge(
            f"values[{name!r}]", f"is over {settings.max_value_bytes} bytes as JSON", value
        )
    return encoded


def update(cfg: Config, token: str, values: Mapping[str, Any]) -> Op[None]:
    """Set data fields (JSON values) field by field, so parallel requests
    setting different fields keep each other's writes. Raises
    :class:`~webtier.errors.UnknownSession` without a live session and
    :class:`~webtier.errors.DataTooLarge` past the limits."""
    yield from update_fields(cfg, token, values)


def update_fields(cfg: Config, token: str, values: Mapping[str, Any]) -> Op[dict[str, bytes]]:
    """:func:`update`, returning the fields it wrote (``d<name>`` -> JSON):
    what a request holding the session's hash puts in its copy."""
    settings = cfg.sessions
    where = place(cfg, token)
    if not isinstance(values, Mapping):
        raise InvalidInput("values", "must be a mapping of names to JSON values", values)
    pairs_: list[str] = []
    for name, value in values.items():
        check_name("values", name)
        pairs_ += [name, encode_value(name, value, settings)]
    if not pairs_:
        return {}
    args: tuple[Arg, ...] = (settings.max_fields, settings.max_data_bytes, *pairs_)
    call = ScriptCall(UPDATE, (where.key,), args)
    ((reply,),) = yield (write(where.route, call, idempotent=True),)
    status = int(reply[0])
    if status == 0:
        raise UnknownSession("no live session has this token")
    if status == -1:
        raise DataTooLarge(
            "values",
            f"the session would hold {int(reply[1])} fields, {int(reply[2])} bytes "
            f"(limits: {settings.max_fields} fields, {settings.max_data_bytes} bytes)",
        )
    return {
        f"d{name}": value.encode() for name, value in zip(pairs_[::2], pairs_[1::2], strict=True)
    }


def discard(cfg: Config, token: str, *names: str) -> Op[None]:
    """Remove data fields (missing ones are ignored)."""
    where = place(cfg, token)
    fields = [f"d{check_name('names', name)}" for name in names]
    if fields:
        yield write(where.route, ("HDEL", where.key, *fields), idempotent=True)


def viewed_of(cfg: Config, fields: Mapping[str, bytes]) -> list[str]:
    """The viewed items among a session's fields, newest first (at most ``viewed``)."""
    viewed = [(int(number), item) for item, number in named(fields, "v").items()]
    # A full session holds a few more than ``viewed`` between trims (session_touch.lua).
    return [item for _, item in sorted(viewed, reverse=True)[: cfg.sessions.viewed]]


def recently_viewed(cfg: Config, token: str) -> Op[list[str]]:
    """The session's viewed items, newest first (at most ``viewed``)."""
    where = place(cfg, token)
    (reply,) = yield read(where.route, ("HGETALL", where.key))
    return viewed_of(cfg, fields_of(reply))


def stats(cfg: Config) -> Op[SessionStats]:
    """How many sessions the store lists, and how old the oldest and newest
    are. One round trip per node."""
    replies = yield tuple(
        read(
            route,
            ("ZCARD", recent := cfg.keys.session_recent(route)),
            ("ZRANGE", recent, 0, 0, "WITHSCORES"),
            ("ZRANGE", recent, -1, -1, "WITHSCORES"),
        )
        for route in (cfg.keys.session_shard(s) for s in range(cfg.sessions.shards))
    )
    counts = [int(card) for card, _, _ in replies]
    firsts = [float(score) for _, first, _ in replies for _, score in pairs(first)]
    lasts = [float(score) for _, _, last in replies for _, score in pairs(last)]
    return SessionStats(
        sum(counts),
        max(counts),
        min(firsts) / 1e6 if firsts else None,
        max(lasts) / 1e6 if lasts else None,
    )
