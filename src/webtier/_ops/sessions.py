"""Login sessions and recently viewed items (Redis in Action 2.1), without
the book's cleaner race.

Layout, per session, in the shard ``crc32(token) % shards``:

* one hash per session, ``<prefix>:{s:<shard>}:t:<token>``. One-letter
  fields are the session's own: user (``u``), created (``c``, server ms),
  public id (``i``), views so far (``n``), viewed items held (``m``), when
  the key expires (``e``, server ms: touches move it only when due); longer
  ones are a letter and a name: viewed items (``v<item>`` -> the number of
  its latest view), cart lines (``k<item>``) and data (``d<name>``, JSON).
  One key per session: it expires as a whole (idle, absolute or backstop)
  and leaves nothing behind;
* one recency index per shard, ``<prefix>:{s:<shard>}:recent``, a zset of the
  shard's tokens by last-seen time (server µs), in the same slot as its
  sessions, so a touch and a cleaner's check-and-delete are single scripts;
* one set per user, ``<prefix>:{u:<shard of user>}:<user>``, of the user's
  tokens: a hint, which readers check against each session's user and prune,
  and which expires a backstop after the user's last new session.

Login rotation picks the new token in the old one's shard, so the move is
one script in one slot. See docs/sessions.md.
"""

from __future__ import annotations

import bisect
import json
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from webtier._keys import check_name, shard_of
from webtier._ops import ranking
from webtier._protocol import (
    Arg,
    Chain,
    Command,
    Gather,
    Op,
    Reply,
    Request,
    ScriptCall,
    all_applied,
    pairs,
    read,
    text,
    write,
)
from webtier._scripts import Script
from webtier.config import Config, SessionSettings
from webtier.errors import (
    InvalidInput,
    OutcomeUnknown,
    PartiallyApplied,
    ServerError,
    WebtierError,
)
from webtier.sessions import (
    CART_POLICIES,
    CartChange,
    CleanReport,
    DataTooLarge,
    LoginResult,
    SessionInfo,
    SessionStats,
    UnknownSession,
    UserMismatch,
    check_token,
    is_token,
    new_session_id,
    new_token,
)

TOUCH = Script.load("session_touch")
LOGIN = Script.load("session_login")
END = Script.load("session_end")
UPDATE = Script.load("session_update")
CLEAN = Script.load("session_clean")
PICK = Script.load("session_pick")
# A full session holds up to `viewed` + this many items between two trims.
VIEWED_SLACK = TOUCH.constant("SLACK")


class ViewCounting(Protocol):
    """How a touch counts its item's view (:class:`webtier.ranking.ViewCounter`)."""

    @property
    def inline(self) -> bool: ...

    def requests(self, item: str) -> tuple[Request, ...]: ...

    def upkeep(self) -> tuple[Request, ...]: ...


_NEW_ATTEMPTS = 5  # a fresh 256-bit token is never taken; this only bounds a broken RNG


# -- where a session lives -----------------------------------------------------------------


class Place:
    """The keys of one session (the token is checked before this is built)."""

    __slots__ = ("key", "recent", "route", "shard", "token")

    def __init__(self, cfg: Config, token: str) -> None:
        self.token = token
        self.shard = shard_of(token, cfg.sessions.shards)
        self.route = cfg.keys.session_shard(self.shard)
        self.key = cfg.keys.session(self.route, token)
        self.recent = cfg.keys.session_recent(self.route)


def place(cfg: Config, token: object) -> Place:
    return Place(cfg, check_token(token, strict=cfg.sessions.strict))


# The backstop only bounds memory, so a touch may set it up to this share of
# itself late and rewrites it only when due (session_touch.lua).
BACKSTOP_LATENESS = 64  # a 64th: 11 h 15 min of the default 30 days


def timeouts(settings: SessionSettings) -> tuple[int, int, int, int]:
    """(idle, absolute, backstop, how late the backstop may be set) in ms, as
    the scripts take them."""
    idle, absolute, backstop = settings.millis
    return idle, absolute, backstop, backstop // BACKSTOP_LATENESS


def _user_index(cfg: Config, user: str) -> str:
    return cfg.keys.user_sessions(user, cfg.sessions.shards)


def index_user(cfg: Config, user: str, token: str) -> Request:
    """List ``token`` among ``user``'s sessions (idempotent)."""
    key = _user_index(cfg, user)
    _, _, backstop = cfg.sessions.millis
    # A hash, not a set: a user's few tokens stay in a listpack (about 120
    # bytes less a session than a set of strings, which Redis 7.0 keeps as a
    # hash table).
    return write(key, ("HSET", key, token, ""), ("PEXPIRE", key, backstop), idempotent=True)


def _unindex(cfg: Config, by_user: Iterable[tuple[str, str]]) -> tuple[Request, ...]:
    """Requests dropping (user, token) pairs from the users' indexes: one
    pipeline per shard of the users' indexes."""
    commands: dict[str, list[Command]] = defaultdict(list)
    for user, token in by_user:
        key = _user_index(cfg, user)
        commands[key[: key.index("}") + 1]].append(("HDEL", key, token))
    return tuple(write(route, *found, idempotent=True) for route, found in commands.items())


def fields_of(reply: Reply) -> dict[str, bytes]:
    return {text(name): value for name, value in pairs(reply)}


def _user(value: Reply) -> str | None:
    return None if value is None or value == b"" else text(value)


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
    the item's view in the ranking if the session is live (one server only:
    the ranking is in another slot)."""
    settings = cfg.sessions
    args = (where.token, mode, sid, user or "", item or "", settings.viewed, *timeouts(settings))
    keys = (where.key, where.recent, cfg.keys.viewed) if count_view else (where.key, where.recent)
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
    upkeep = views.upkeep() if inline and views is not None else ()
    replies = yield _indexed_first(cfg, user, where.token, touched, *upkeep)
    status, *rest = replies[-1 - len(upkeep)][0]
    if int(status) == -1:
        raise UserMismatch(f"the session belongs to {text(rest[0])!r}, not {user!r}: use login")
    live = int(status) == 1
    if live and item is not None and not inline:
        counted = views.requests(item) if views is not None else ranking.view_requests(cfg, item)
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


# -- login rotation, logout, the user's sessions ------------------------------------------


def named(fields: Mapping[str, bytes], kind: str) -> dict[str, bytes]:
    """The fields of one kind (``v`` viewed, ``k`` cart, ``d`` data), by name.
    The session's own fields have one letter, so they are never among them."""
    return {name[1:]: value for name, value in fields.items() if len(name) > 1 and name[0] == kind}


def cart_of(fields: Mapping[str, bytes]) -> dict[str, int]:
    return {item: int(count) for item, count in named(fields, "k").items()}


def merge_carts(
    user_cart: Mapping[str, int],
    anonymous: Mapping[str, int],
    policy: str,
    lines: int,
    most: int,
) -> tuple[dict[str, int], tuple[CartChange, ...]]:
    """The cart a login leaves the user with, and how it differs from
    ``user_cart``: ``add`` sums the counts, ``replace`` takes the anonymous
    cart when it has lines, ``keep_larger`` the larger count of each item.
    Counts are capped at ``most``; lines beyond ``lines`` are dropped, the
    anonymous cart's first."""
    if policy == "replace":
        merged = dict(anonymous or user_cart)
    elif policy == "add":
        merged = dict(user_cart)
        for item, count in anonymous.items():
            merged[item] = merged.get(item, 0) + count
    else:
        merged = dict(user_cart)
        for item, count in anonymous.items():
            merged[item] = max(merged.get(item, 0), count)
    order = [*anonymous, *(item for item in user_cart if item not in anonymous)]
    kept = {item: min(merged[item], most) for item in order if item in merged}
    kept = dict(list(kept.items())[:lines])
    changes = tuple(
        CartChange(item, user_cart.get(item, 0), kept.get(item, 0))
        for item in sorted({*user_cart, *kept})
        if user_cart.get(item, 0) != kept.get(item, 0)
    )
    return kept, changes


def _token_in_shard(cfg: Config, shard: int) -> str:
    """A fresh token in ``shard`` (about ``shards`` draws): the old and new
    token then share a slot, so a login is one atomic script."""
    shards = cfg.sessions.shards
    while True:
        token = new_token()
        if shard_of(token, shards) == shard:
            return token


def _live_sessions(cfg: Config, user: str, tokens: Iterable[str]) -> Op[dict[str, SessionInfo]]:
    """The sessions among ``tokens`` that are live and ``user``'s, by token;
    the others are dropped from the user's index."""
    places = [Place(cfg, t) for t in tokens if is_token(t, strict=False)]
    by_shard: dict[str, list[Place]] = defaultdict(list)
    for where in places:
        by_shard[where.route].append(where)
    if not by_shard:
        return {}
    groups = list(by_shard.values())
    replies = yield tuple(
        read(group[0].route, *(c for where in group for c in _info_commands(where)))
        for group in groups
    )
    found: dict[str, SessionInfo] = {}
    stale: list[tuple[str, str]] = []
    for group, group_replies in zip(groups, replies, strict=True):
        for n, where in enumerate(group):
            (created, sid, owner), score = group_replies[2 * n : 2 * n + 2]
            session = _info(created, sid, owner, score)
            if session is not None and session.user == user:
                found[where.token] = session
            else:
                stale.append((user, where.token))
    if stale:
        yield from _tidy(_unindex(cfg, stale))
    return found


def _tidy(requests: tuple[Request, ...]) -> Op[None]:
    """Drop stale entries from users' indexes, if Redis lets us now: an
    entry left behind is harmless (readers check and drop it), so its
    failure never fails the operation that found it."""
    if requests:
        yield Gather(requests)


def _indexed(cfg: Config, user: str) -> Op[list[str]]:
    key = _user_index(cfg, user)
    (members,) = yield read(key, ("HKEYS", key))
    return sorted(text(m) for m in members)


def login(cfg: Config, token: str, user: str, *, cart_policy: str = "add") -> Op[LoginResult]:
    """Log the session in as ``user`` under a new token, returned; the old
    token is dead at once. Data and viewed items move with it; its cart
    merges into the cart of ``user``'s most recently seen other session by
    ``cart_policy`` (add, replace, keep_larger). Atomic for the session."""
    settings = cfg.sessions
    where = place(cfg, token)
    check_name("user", user)
    if cart_policy not in CART_POLICIES:
        raise InvalidInput("cart_policy", f"must be one of {', '.join(CART_POLICIES)}", cart_policy)
    for _ in range(_NEW_ATTEMPTS):
        index = _user_index(cfg, user)
        (fields,), (members,) = yield (
            read(where.route, ("HGETALL", where.key)),
            read(index, ("HKEYS", index)),
        )
        if not fields:
            raise UnknownSession("no live session has this token")
        anonymous = cart_of(fields_of(fields))
        others = [text(m) for m in members if text(m) != token]
        user_cart = yield from _latest_cart(cfg, user, others)
        merged, changes = merge_carts(
            user_cart, anonymous, cart_policy, settings.cart_lines, settings.cart_count
        )
        new_one = _token_in_shard(cfg, where.shard)
        moved = Place(cfg, new_one)
        args = (
            token, new_one, user, *timeouts(settings),
            len(anonymous), *_flat(anonymous), *_flat(merged),
        )  # fmt: skip
        call = ScriptCall(LOGIN, (where.key, moved.key, where.recent), args)
        moving = write(where.route, call, idempotent=False)
        (_, (reply,)) = yield _indexed_first(cfg, user, new_one, moving)
        status = int(reply[0])
        if status == 0:
            raise UnknownSession("no live session has this token")
        if status == 1:
            previous = text(reply[1])
            if previous:
                yield from _tidy(_unindex(cfg, [(previous, token)]))
            return LoginResult(new_one, changes)
        # -2: the new token was taken; -3: the cart changed meanwhile. Again.
    raise ServerError("the session kept changing during login; try again")


def _flat(cart: Mapping[str, int]) -> list[str | int]:
    return [part for item, count in cart.items() for part in (item, count)]


def _latest_cart(cfg: Config, user: str, tokens: list[str]) -> Op[dict[str, int]]:
    """The cart of ``user``'s most recently seen live session among ``tokens``."""
    live = yield from _live_sessions(cfg, user, tokens)
    if not live:
        return {}
    latest = max(live, key=lambda t: live[t].last_seen)
    where = Place(cfg, latest)
    (fields,) = yield read(where.route, ("HGETALL", where.key))
    return cart_of(fields_of(fields))


def _end(cfg: Config, places: list[Place], owner: str = "") -> Op[list[str | None]]:
    """End these sessions (only ``owner``'s when given); per session, its
    user ('' anonymous) or None if it was not ended. One round trip per node."""
    by_shard: dict[str, list[Place]] = defaultdict(list)
    for where in places:
        by_shard[where.route].append(where)
    groups = list(by_shard.values())
    calls = []
    for group in groups:
        keys = (group[0].recent, *(w.key for w in group))
        args = (*(w.token for w in group), *(owner for _ in group))
        calls.append(write(group[0].route, ScriptCall(END, keys, args), idempotent=True))
    # Shards on several nodes may fail apart: say which sessions ended.
    results = yield Gather(tuple(calls))
    names = [f"{len(group)} session(s) of shard {group[0].shard}" for group in groups]
    replies = all_applied("ending sessions", list(zip(names, results, strict=True)))
    ended: dict[str, str | None] = {}
    for group, (reply,) in zip(groups, replies, strict=True):
        for where, user in zip(group, reply, strict=True):
            ended[where.token] = None if user is None else text(user)
    gone = [(user, token) for token, user in ended.items() if user]
    yield from _tidy(_unindex(cfg, gone))
    return [ended[w.token] for w in places]


def logout(cfg: Config, token: str) -> Op[None]:
    """End the session: its token, data, viewed items and cart are gone."""
    yield from _end(cfg, [place(cfg, token)])


def of_user(cfg: Config, user: str) -> Op[list[SessionInfo]]:
    """``user``'s live sessions, most recently seen first."""
    check_name("user", user)
    tokens = yield from _indexed(cfg, user)
    live = yield from _live_sessions(cfg, user, tokens)
    return sorted(live.values(), key=lambda s: (-s.last_seen, s.id))


def revoke(cfg: Config, user: str, session_id: str) -> Op[bool]:
    """End ``user``'s session of public id ``session_id``; ``False`` if the
    user has no such live session."""
    check_name("user", user)
    if not isinstance(session_id, str):
        raise InvalidInput("session_id", "must be a str", session_id)
    tokens = yield from _indexed(cfg, user)
    live = yield from _live_sessions(cfg, user, tokens)
    chosen = [Place(cfg, t) for t, s in live.items() if s.id == session_id]
    if not chosen:
        return False
    ended = yield from _end(cfg, chosen, owner=user)
    return any(u is not None for u in ended)


def revoke_all(cfg: Config, user: str) -> Op[int]:
    """End all of ``user``'s sessions ("log out everywhere"); how many ended."""
    check_name("user", user)
    tokens = yield from _indexed(cfg, user)
    places = [Place(cfg, t) for t in tokens if is_token(t, strict=False)]
    if not places:
        return 0
    ended = yield from _end(cfg, places, owner=user)
    return sum(u is not None for u in ended)


# -- session data and viewed items ----------------------------------------------------------


def data(cfg: Config, token: str) -> Op[dict[str, Any]]:
    """The session's data, decoded from JSON ({} when there is no session)."""
    where = place(cfg, token)
    (reply,) = yield read(where.route, ("HGETALL", where.key))
    return {name: json.loads(value) for name, value in named(fields_of(reply), "d").items()}


def _encode(settings: SessionSettings, name: str, value: object) -> str:
    try:
        encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:  # RecursionError: too deep
        raise InvalidInput(f"values[{name!r}]", f"is not JSON: {error}", value) from None
    if len(encoded.encode()) > settings.max_value_bytes:
        raise DataTooLarge(
            f"values[{name!r}]", f"is over {settings.max_value_bytes} bytes as JSON", value
        )
    return encoded


def update(cfg: Config, token: str, values: Mapping[str, Any]) -> Op[None]:
    """Set data fields (JSON values) field by field, so parallel requests
    setting different fields keep each other's writes. Raises
    :class:`~webtier.sessions.UnknownSession` without a live session and
    :class:`~webtier.sessions.DataTooLarge` past the limits."""
    settings = cfg.sessions
    where = place(cfg, token)
    if not isinstance(values, Mapping):
        raise InvalidInput("values", "must be a mapping of names to JSON values", values)
    pairs_: list[str] = []
    for name, value in values.items():
        check_name("values", name)
        pairs_ += [name, _encode(settings, name, value)]
    if not pairs_:
        return
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


def discard(cfg: Config, token: str, *names: str) -> Op[None]:
    """Remove data fields (missing ones are ignored)."""
    where = place(cfg, token)
    fields = [f"d{check_name('names', name)}" for name in names]
    if fields:
        yield write(where.route, ("HDEL", where.key, *fields), idempotent=True)


def recently_viewed(cfg: Config, token: str) -> Op[list[str]]:
    """The session's viewed items, newest first (at most ``viewed``)."""
    where = place(cfg, token)
    (reply,) = yield read(where.route, ("HGETALL", where.key))
    viewed = [(int(number), item) for item, number in named(fields_of(reply), "v").items()]
    # A full session holds a few more than ``viewed`` between trims (session_touch.lua).
    return [item for _, item in sorted(viewed, reverse=True)[: cfg.sessions.viewed]]


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


# -- the cleaner ----------------------------------------------------------------------------


def _check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidInput("limit", "must be an int >= 0", limit)
    return limit


def _scores(page: list[Reply]) -> list[int]:
    # Scores are whole µs below 2**53, which Redis writes as plain digits;
    # anything else (a score some other writer left) is read as a float.
    try:
        return [int(score) for score in page]
    except ValueError:
        return [int(float(score)) for score in page]


# A cleaner's choice: per shard, (the highest score to remove, the most to
# remove, how many of those surely were there when picked). The bound is a
# score, or "(<cutoff>" for "below the cutoff".
Choice = dict[int, tuple[Arg, int, int]]


def _stale_first(cutoffs: list[int], stale: list[int], budget: int) -> Choice:
    """Stale sessions only, in shard order, at most ``budget``: any of them
    may go, so which of them is free."""
    chosen: Choice = {}
    for shard, count in enumerate(stale):
        take = min(count, budget)
        if take:
            chosen[shard] = (f"({cutoffs[shard]}", take, take)
            budget -= take
    return chosen


def _choose_by_samples(settings: SessionSettings, picks: list[Reply], keep: int) -> Choice | None:
    """The cleaner's choice from each shard's [cutoff, sessions, stale,
    rank, score, rank, score...], or ``None`` when the samples are too
    coarse to choose well (few sessions over the limit with tied scores,
    say): then the caller reads whole pages (:func:`_choose`).

    Stale sessions go first; then, while the store is over ``keep``, the
    oldest fresh ones: every session of every shard scoring up to a
    threshold ``T``. Samples bound how many score up to ``T`` in a shard:
    at most the rank of its first sample above ``T``, at least one more than
    the rank of its last sample at or below it. ``T`` is the highest sample
    score whose upper bounds add up to no more than may go, so what goes is
    exactly the oldest of all shards, never more than allowed, and often a
    little less. Race-free as :func:`_choose`: no shard's bound is above a
    score of its own."""
    cutoffs, cards, stale, ranks, scores = [], [], [], [], []
    for cutoff, sessions, below, *samples in picks:
        cutoffs.append(int(cutoff))
        cards.append(int(sessions))
        stale.append(int(below))
        ranks.append([int(rank) for rank in samples[0::2]])
        scores.append(_scores(samples[1::2]))
    stale_total = sum(stale)
    wanted = min(settings.clean_batch, max(stale_total, sum(cards) - keep))
    if wanted <= stale_total:
        return _stale_first(cutoffs, stale, wanted)

    def bounds(threshold: float) -> tuple[list[int], list[int]]:
        most, least = [], []
        for shard, shard_scores in enumerate(scores):
            if threshold < cutoffs[shard]:
                most.append(stale[shard])
                least.append(stale[shard])
                continue
            at = bisect.bisect_right(shard_scores, threshold)
            above = ranks[shard][at] if at < len(shard_scores) else cards[shard]
            most.append(max(above, stale[shard]))
            least.append(max(ranks[shard][at - 1] + 1 if at else 0, stale[shard]))
        return most, least

    # A shard whose page is not the whole shard may hold sessions scoring up
    # to its last sample beyond the page: thresholds stop there (as in
    # _choose). Below it, every shard's last sample is at or below its
    # highest score, which bounds what the removal may take in that shard.
    horizon = min(
        (
            shard_scores[-1]
            for shard_scores, card, shard_ranks in zip(scores, cards, ranks, strict=True)
            if shard_ranks and card > shard_ranks[-1] + 1
        ),
        default=math.inf,
    )
    candidates = sorted(
        {score for shard_scores in scores for score in shard_scores if score <= horizon}
    )
    # The highest candidate that fits (the bounds grow with the threshold).
    low, high = 0, len(candidates)
    while low < high:
        middle = (low + high) // 2
        if sum(bounds(candidates[middle])[0]) <= wanted:
            low = middle + 1
        else:
            high = middle
    threshold = candidates[low - 1] if low else -math.inf
    most, least = bounds(threshold)
    if sum(least) < max(1, wanted // 2):
        return None
    chosen: Choice = {}
    for shard, count in enumerate(most):
        if count:
            # Never above a score the shard itself holds: on a Cluster each
            # shard's scores come from its own node's clock, and a session
            # touched after the pick scores above the shard's highest only.
            bound: Arg = f"({cutoffs[shard]}"
            if threshold >= cutoffs[shard]:
                bound = min(threshold, scores[shard][-1])
            chosen[shard] = (bound, count, least[shard])
    return chosen


def _choose(settings: SessionSettings, picks: list[Reply], keep: int, per_shard: int) -> Choice:
    """The cleaner's choice from each shard's whole page: [cutoff, sessions,
    stale, oldest scores...]. Every shard's choice is a run of its oldest,
    so a score and a count say it.

    Stale sessions (idle past the timeout or the backstop) go first, in shard
    order; then, while the store is over ``keep``, the oldest fresh ones of
    all shards (ties in shard order); at most ``clean_batch`` in all. Pages
    are sorted, so each shard's stale and chosen sessions are prefixes of its
    page: counted with bisection, not entry by entry (a step reads thousands)."""
    remaining = 0
    pages: list[list[int]] = []
    stale: list[int] = []  # per shard, how many of its page are stale
    # A shard whose page came back full may hold entries older than the ones
    # another shard's page shows: only entries up to the lowest end of a full
    # page are surely among the oldest of all shards, so only those are chosen.
    horizon = math.inf
    for cutoff, sessions, _, *page in picks:
        remaining += int(sessions)
        scores = _scores(page)
        pages.append(scores)
        stale.append(bisect.bisect_left(scores, int(cutoff)))
        if len(scores) == per_shard:
            horizon = min(horizon, scores[-1])
    budget = settings.clean_batch
    taken = []
    for count in stale:
        taken.append(min(count, budget))
        budget -= taken[-1]
    fresh = [
        scores[first : bisect.bisect_right(scores, horizon, lo=first)]
        for scores, first in zip(pages, stale, strict=True)
    ]
    wanted = min(max(0, remaining - sum(stale) - keep), budget)
    if wanted:
        _take_oldest(fresh, wanted, taken)
    return {
        shard: (pages[shard][count - 1], count, count) for shard, count in enumerate(taken) if count
    }


def _take_oldest(runs: list[list[int]], wanted: int, taken: list[int]) -> None:
    """Add to ``taken`` the ``wanted`` lowest scores of the sorted ``runs``
    (all of them if fewer), ties going to the lower shard."""
    merged = sorted(score for run in runs for score in run)
    if wanted >= len(merged):
        for shard, run in enumerate(runs):
            taken[shard] += len(run)
        return
    last = merged[wanted - 1]
    below = [bisect.bisect_left(run, last) for run in runs]
    ties = wanted - sum(below)
    for shard, run in enumerate(runs):
        at_last = min(bisect.bisect_right(run, last) - below[shard], ties)
        ties -= at_last
        taken[shard] += below[shard] + at_last


def _stale_age_us(settings: SessionSettings) -> int:
    return math.ceil(min(settings.idle_timeout or settings.backstop, settings.backstop) * 1e6)


def clean(
    cfg: Config, *, limit: int | None = None, max_steps: int | None = None
) -> Op[CleanReport]:
    """One cleaner pass: remove the least recently seen sessions beyond
    ``limit`` (default: the configured one), and those idle past the idle
    timeout or the backstop, step by step until none is left to remove (or
    ``max_steps``). Race-free: a session touched after the cleaner read its
    shard is kept. Two round trips per step (three when sampled scores do
    not suffice). The users' indexes are hints, pruned when read
    (:func:`of_user`, :func:`login`, :func:`revoke`)."""
    settings = cfg.sessions
    keep = settings.limit if limit is None else _check_limit(limit)
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int)):
        raise InvalidInput("max_steps", "must be an int >= 1 or None", max_steps)
    started = time.monotonic()
    per_shard = max(1, math.ceil(settings.clean_batch * 1.25 / settings.shards))
    age = _stale_age_us(settings)
    routes = [cfg.keys.session_shard(shard) for shard in range(settings.shards)]
    recents = [cfg.keys.session_recent(route) for route in routes]
    prefixes = [cfg.keys.session(route, "") for route in routes]

    def pick(mode: str) -> tuple[Request, ...]:
        return tuple(
            read(route, ScriptCall(PICK, (recent,), (age, per_shard, mode)))
            for route, recent in zip(routes, recents, strict=True)
        )

    deleted = spared = steps = remaining = 0
    more = False
    while True:
        picks = [reply for (reply,) in (yield pick("sample"))]
        remaining = sum(int(sessions) for _, sessions, *_ in picks)
        chosen = _choose_by_samples(settings, picks, keep)
        if chosen is None:  # too coarse here: read the oldest scores whole
            picks = [reply for (reply,) in (yield pick("all"))]
            remaining = sum(int(sessions) for _, sessions, *_ in picks)
            chosen = _choose(settings, picks, keep, per_shard)
        if not chosen:
            break
        shards = list(chosen)
        replies = yield tuple(
            write(
                routes[shard],
                ScriptCall(CLEAN, (recents[shard], prefixes[shard]), chosen[shard][:2]),
                idempotent=True,
            )
            for shard in shards
        )
        for shard, (removed,) in zip(shards, replies, strict=True):
            deleted += int(removed)
            # Sessions surely there when picked, not removed: touched since.
            spared += max(0, chosen[shard][2] - int(removed))
            remaining -= int(removed)
        steps += 1
        if max_steps is not None and steps >= max_steps:
            more = True
            break
    return CleanReport(deleted, spared, remaining, steps, time.monotonic() - started, more)
