"""The session's logic as operations: each flow is an ordinary op of
:mod:`webtier._core.protocol`, made of the session and cart ops with
``yield from``, and runs on the tier's own transport (sync or asyncio) like
any other. A flow catches the errors the transport throws in at its
``yield`` (an outage, a session that ended meanwhile) where the request
can carry on.

A session is lazy: nothing is read before the handler asks, and nothing is
written (no key, no cookie) before it writes. A visitor who only browses
costs no Redis call and gets no cookie.

A request with a live session reads it once: the first read loads the
session's whole hash (checked, and touched when due, in the same round trip)
into :attr:`SessionState.fields`, every later read answers from that copy,
and each write updates it as it updates Redis. A write made meanwhile by a
parallel request of the same visitor shows in the next request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from webtier import sessions
from webtier._core.keys import check_name
from webtier._core.protocol import Op, text
from webtier.config import Config
from webtier.errors import LateCookie, PartiallyApplied, RedisUnavailable, UnknownSession
from webtier.sessions.tokens import CartPolicy
from webtier.types import LoginResult
from webtier.web.sessions.state import SessionState

T = TypeVar("T")


def load(cfg: Config, state: SessionState, *, taking: tuple[str, ...] = ()) -> Op[str | None]:
    """The session's user, and its whole hash kept for the request's other
    reads: one round trip, once per request, and a second that touches a
    session idle for ``refresh_after``. ``taking``: data names a load from
    Redis removes in its round trip (see :func:`pop`; not the hash the page
    cache read with the page)."""
    if state.loaded:
        return state.user
    state.loaded = True
    if state.token is None:
        return None
    try:
        fields, state.read_with_page = state.read_with_page, None  # taken once
        if fields is None:
            fields = yield from sessions.ops.load(
                cfg, state.token, state.refresh_after, taking=taking
            )
    except RedisUnavailable as error:
        if state.options.on_outage == "fail":
            state.loaded = False
            raise
        state.outages.failed(error, "served as anonymous")
        state.degraded = error
        return None
    if fields is None:
        # Not cleared: the cookie may be one a concurrent login just rotated,
        # and deleting it here would log the visitor out of the new one.
        state.token = None
        return None
    if state.resign:
        state.cookie = "set"
    user = fields.get("u")
    state.fields, state.user = fields, text(user) if user else None
    return state.user


def _live(cfg: Config, state: SessionState) -> Op[str | None]:
    """The live session's token, or None (anonymous)."""
    yield from load(cfg, state)
    return None if state.degraded else state.token


def _ensure(cfg: Config, state: SessionState) -> Op[str]:
    """The live session's token, creating the session (and its cookie) on
    the first write."""
    yield from load(cfg, state)
    if state.degraded:
        raise state.degraded  # writes need the store
    if state.token is None:
        _cookie_can_change(state)
        state.token = yield from sessions.ops.new(cfg)
        state.cookie, state.fields = "set", {}
    return state.token


def _fields(cfg: Config, state: SessionState) -> Op[Mapping[str, bytes]]:
    """The live session's hash as this request sees it ({} when anonymous)."""
    token = yield from _live(cfg, state)
    # A live token's hash is held: its load, its creation or its login's move set it.
    return {} if token is None or state.fields is None else state.fields


def _cookie_can_change(state: SessionState) -> None:
    if state.headers_sent:
        raise LateCookie("the response has started: the session cookie can no longer change")


def _forget(state: SessionState) -> None:
    state.token, state.user, state.fields = None, None, None


def user(cfg: Config, state: SessionState) -> Op[str | None]:
    return (yield from load(cfg, state))


def session_id(cfg: Config, state: SessionState) -> Op[str | None]:
    """The session's public id, as ``tier.sessions.of_user`` lists it (never
    the token), or None when there is no session."""
    public = (yield from _fields(cfg, state)).get("i")
    return None if public is None else text(public)


def data(cfg: Config, state: SessionState) -> Op[dict[str, Any]]:
    return sessions.ops.data_of((yield from _fields(cfg, state)))


def get(cfg: Config, state: SessionState, name: str, default: Any = None) -> Op[Any]:
    return (yield from data(cfg, state)).get(name, default)


def _write(cfg: Config, state: SessionState, write: Callable[[str], Op[T]]) -> Op[T]:
    """Runs the write ``write(token)`` on the session, creating it first if
    needed. A session that ended since it was looked up (revoked, expired)
    is forgotten and the write goes to a new one, as for a new visitor."""
    token = yield from _ensure(cfg, state)
    try:
        return (yield from write(token))
    except UnknownSession:
        _forget(state)
    token = yield from _ensure(cfg, state)
    return (yield from write(token))


def pop(cfg: Config, state: SessionState, name: str, default: Any = None) -> Op[Any]:
    """The data value ``name`` (``default`` without one), removed from the
    session: a message shown once. As the request's first read, the removal
    rides in the load's round trip; later, it is one write, made only when
    the value is there."""
    field = f"d{check_name('name', name)}"
    taken = not state.loaded and state.token is not None and state.read_with_page is None
    if taken:
        yield from load(cfg, state, taking=(name,))
    fields = yield from _fields(cfg, state)
    if field not in fields:
        return default
    value = sessions.ops.data_of({field: fields[field]})[name]
    if taken:
        _drop(state, lambda held: held == field)
    else:
        yield from discard(cfg, state, name)
    return value


def update(cfg: Config, state: SessionState, values: Mapping[str, Any]) -> Op[None]:
    written = yield from _write(
        cfg, state, lambda token: sessions.ops.update_fields(cfg, token, dict(values))
    )
    _held(state).update(written)


def discard(cfg: Config, state: SessionState, *names: str) -> Op[None]:
    token = yield from _live(cfg, state)
    if token is not None:
        yield from sessions.ops.discard(cfg, token, *names)
        _drop(state, lambda field: field[1:] in names and field[0] == "d")


def recently_viewed(cfg: Config, state: SessionState) -> Op[list[str]]:
    return sessions.ops.viewed_of(cfg, (yield from _fields(cfg, state)))


def record_view(cfg: Config, state: SessionState, item: str) -> Op[None]:
    """Pushes ``item`` onto the session's recently viewed and counts the
    view for the ranking, in one round trip. Served as anonymous during an
    outage, the view is dropped (logged) rather than failing the page.
    The view is counted once: a touch counts it only for a live session,
    and one whose count alone failed (the ranking's node away, on Cluster)
    is not repeated."""
    try:
        token = yield from _ensure(cfg, state)
    except RedisUnavailable:
        if state.degraded is None:
            raise
        return
    try:
        if not (yield from sessions.ops.touch(cfg, token, item=item, views=state.views)):
            _forget(state)  # the session ended meanwhile: the view goes to a new one
            token = yield from _ensure(cfg, state)
            yield from sessions.ops.touch(cfg, token, item=item, views=state.views)
    except PartiallyApplied as error:
        if "session" not in error.applied:
            raise
        state.outages.failed(error, "view not counted")
    if cfg.sessions.viewed > 0:
        # As the touch numbered it (session_touch.lua): the newest view.
        held = _held(state)
        number = str(int(held.get("n", 0)) + 1).encode()
        held.update({"n": number, f"v{item}": number})


def cart(cfg: Config, state: SessionState) -> Op[dict[str, int]]:
    return sessions.users.cart_of((yield from _fields(cfg, state)))


def set_cart(cfg: Config, state: SessionState, item: str, count: int) -> Op[None]:
    """Sets the count of ``item`` in the cart (0 or less removes it)."""
    yield from _write(cfg, state, lambda token: sessions.carts.set(cfg, token, item, count))
    if count > 0:
        _held(state)[f"k{item}"] = str(int(count)).encode()
    else:
        _drop(state, lambda field: field == f"k{item}")


def clear_cart(cfg: Config, state: SessionState) -> Op[None]:
    token = yield from _live(cfg, state)
    if token is not None:
        yield from sessions.carts.clear(cfg, token)
        _drop(state, lambda field: len(field) > 1 and field[0] == "k")


def _held(state: SessionState) -> dict[str, bytes]:
    """The request's copy of the session's hash, for a write to update (a
    write's session was loaded, created or moved first: a copy is held)."""
    return state.fields if state.fields is not None else {}


def _drop(state: SessionState, removed: Callable[[str], bool]) -> None:
    if state.fields is not None:
        state.fields = {name: value for name, value in state.fields.items() if not removed(name)}


def login(
    cfg: Config, state: SessionState, user: str, cart_policy: CartPolicy = "add"
) -> Op[LoginResult | None]:
    """Logs ``user`` in under a new token (the old one dies at once; data,
    cart and viewed items carry over, the anonymous cart merged into the
    user's by ``cart_policy``) and sends its cookie. Returns the tier's
    :class:`~webtier.types.LoginResult` (with the cart changes), or None
    when there was no session to carry over."""
    token = yield from _live(cfg, state)
    if state.degraded:
        raise state.degraded
    _cookie_can_change(state)
    moved = None
    if token is not None:
        try:
            moved = yield from sessions.users.login_moved(cfg, token, user, cart_policy=cart_policy)
        except UnknownSession:
            _forget(state)
    if moved is None:
        state.token = yield from sessions.ops.new(cfg, user=user)
        state.fields = {}
        result = None
    else:
        # Data and viewed items carried over, the cart merged with the
        # user's: the request reads the new session as the move left it.
        result, state.fields = moved
        state.token = result.token
    state.user, state.cookie = user, "set"
    return result


def logout(cfg: Config, state: SessionState) -> Op[None]:
    """Ends the session in Redis and clears the cookie."""
    _cookie_can_change(state)
    token = state.token
    if token is not None:
        yield from sessions.users.logout(cfg, token)
    state.loaded, state.token, state.user, state.fields = True, None, None, None
    if state.cookie_came or token is not None:
        state.cookie = "clear"
