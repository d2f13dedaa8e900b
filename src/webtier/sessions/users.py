"""Login rotation with cart merge, logout, and a user's sessions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from webtier._core.keys import check_name, shard_of
from webtier._core.protocol import (
    Gather,
    Op,
    Request,
    ScriptCall,
    all_applied,
    read,
    text,
    write,
)
from webtier.config import Config
from webtier.errors import (
    InvalidInput,
    ServerError,
    UnknownSession,
)
from webtier.sessions.layout import (
    _NEW_ATTEMPTS,
    END,
    LOGIN,
    Place,
    _unindex,
    _user_index,
    fields_of,
    named,
    place,
    timeouts,
)
from webtier.sessions.ops import _indexed_first, _info, _info_commands
from webtier.sessions.tokens import CART_POLICIES, is_token, new_token
from webtier.types import CartChange, LoginResult, SessionInfo

# -- login rotation, logout, the user's sessions ------------------------------------------


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


def token_in_shard(cfg: Config, shard: int) -> str:
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
    result, _ = yield from login_moved(cfg, token, user, cart_policy=cart_policy)
    return result


def login_moved(
    cfg: Config, token: str, user: str, *, cart_policy: str = "add"
) -> Op[tuple[LoginResult, dict[str, bytes]]]:
    """:func:`login`, and the new session's hash as the move left it (what a
    request reads next: its merged cart, its data), from the move's reply."""
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
        new_one = token_in_shard(cfg, where.shard)
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
            return LoginResult(new_one, changes), fields_of(reply[2])
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


def end_sessions(cfg: Config, places: list[Place], owner: str = "") -> Op[list[str | None]]:
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
    yield from end_sessions(cfg, [place(cfg, token)])


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
    ended = yield from end_sessions(cfg, chosen, owner=user)
    return any(u is not None for u in ended)


def revoke_all(cfg: Config, user: str) -> Op[int]:
    """End all of ``user``'s sessions ("log out everywhere"); how many ended."""
    check_name("user", user)
    tokens = yield from _indexed(cfg, user)
    places = [Place(cfg, t) for t in tokens if is_token(t, strict=False)]
    if not places:
        return 0
    ended = yield from end_sessions(cfg, places, owner=user)
    return sum(u is not None for u in ended)
