"""What the session middlewares share, with no I/O in it: settings, the
cookie (parsing, HMAC signing, attributes), and the session's logic.

The logic is written once as generators that yield the tier calls they wait
for (:class:`Ask`); :func:`drive` runs them on a sync tier and
:func:`drive_async` on an asyncio one, so the ASGI, WSGI and Django adapters
differ only in how they read a request and write response headers.

A session is lazy: nothing is read before the handler asks, and nothing is
written (no key, no cookie) before it writes. A visitor who only browses
costs no Redis call and gets no cookie.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import logging
import math
import re
import time
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.cookies import Morsel
from typing import Any, Concatenate, Literal, ParamSpec, TypeAlias, TypeVar

from webtier._core.deadline import check_limit
from webtier._core.throttle import Throttle
from webtier.errors import (
    ConfigError,
    LateCookie,
    PartiallyApplied,
    RedisUnavailable,
    UnknownSession,
    WebtierError,
)
from webtier.sessions import CartPolicy, is_token
from webtier.types import LoginResult

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger("webtier.sessions")

DEFAULT_COOKIE = "webtier_session"
# The key where adapters leave the session: in the ASGI scope and the WSGI
# environ (Starlette also gets ``request.state.session``, Django
# ``request.webtier_session``).
SESSION_KEY = "webtier.session"

_MAC = re.compile(r"[A-Za-z0-9_-]{43}")  # an unpadded URL-safe base64 SHA-256
_MIN_KEY_BYTES = 32


@dataclass(frozen=True)
class SessionOptions:
    """How the session middlewares handle the cookie and outages.

    ``path=None`` scopes the cookie to where the app is mounted (ASGI
    ``root_path``, WSGI ``SCRIPT_NAME``), ``/`` at the top. ``max_age`` is how
    long the browser keeps the cookie (seconds; ``None``: until it closes);
    the server's idle and absolute timeouts decide how long the session
    lives. ``signing_keys``: HMAC-SHA256 keys of at least 32 bytes, the first
    signs, all verify (rotation: put the new key first, drop the old one once
    its cookies are gone). ``insecure_local_http`` drops the ``Secure`` flag
    only for plain-http requests to a loopback host (local development).
    ``on_outage``: ``"fail"`` answers 503 to a request whose handler needs
    the session while Redis is unreachable; ``"anonymous"`` serves it as an
    anonymous visitor (writes still fail). ``refresh_after``: a request
    reading a session last seen longer ago (seconds) touches it, so the idle
    timeout follows activity without a write per request. ``time_limit``:
    seconds each webtier operation of a request (the app's own included) may
    wait for Redis, its retries included, so a hung server costs a request
    at most that before its 503 (``None``: the tier's own limit).
    """

    cookie_name: str = DEFAULT_COOKIE
    path: str | None = None
    domain: str | None = None
    max_age: int | None = 14 * 24 * 3600  # seconds
    same_site: Literal["lax", "strict"] = "lax"
    insecure_local_http: bool = False
    signing_keys: Sequence[bytes | str] = ()
    on_outage: Literal["fail", "anonymous"] = "fail"
    retry_after: int = 5  # seconds, in the 503's Retry-After
    refresh_after: float = 60.0  # seconds
    time_limit: float | None = 1.0  # seconds per operation, tries included
    log_every: float = 30.0  # seconds between two log lines about an outage
    keys: tuple[bytes, ...] = field(init=False, repr=False, compare=False)  # signing_keys, bytes

    def __post_init__(self) -> None:
        if isinstance(self.signing_keys, str | bytes):
            raise ConfigError("signing_keys: a list of keys, newest first (got one key)")
        keys = tuple(k.encode() if isinstance(k, str) else bytes(k) for k in self.signing_keys)
        object.__setattr__(self, "keys", keys)
        try:
            Morsel[str]().set(self.cookie_name, "", "")
        except Exception as error:  # http.cookies.CookieError, not a WebtierError
            problem = f"cookie_name: not a legal cookie name: {self.cookie_name!r}"
            raise ConfigError(problem) from error
        if self.path is not None and not self.path.startswith("/"):
            raise ConfigError(f"path: must start with '/' (got {self.path!r})")
        if self.same_site not in ("lax", "strict"):
            # "none" would send the session on cross-site requests (CSRF).
            raise ConfigError(f"same_site: 'lax' or 'strict' (got {self.same_site!r})")
        if any(len(key) < _MIN_KEY_BYTES for key in keys):
            raise ConfigError(f"signing_keys: each key needs at least {_MIN_KEY_BYTES} bytes")
        if self.on_outage not in ("fail", "anonymous"):
            raise ConfigError(f"on_outage: 'fail' or 'anonymous' (got {self.on_outage!r})")
        if self.max_age is not None and self.max_age <= 0:
            raise ConfigError("max_age: seconds > 0, or None for a browser-session cookie")
        if self.retry_after < 0 or self.refresh_after < 0 or self.log_every < 0:
            raise ConfigError("retry_after, refresh_after and log_every: seconds >= 0")
        check_limit(self.time_limit, "time_limit")


# -- the cookie -------------------------------------------------------------------------------


def _mac(key: bytes, name: str, token: str) -> str:
    # The cookie's name is signed too: a value signed for one cookie is
    # refused in another that shares the key.
    digest = hmac.new(key, f"{name}\0{token}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def encode(options: SessionOptions, token: str) -> str:
    """The cookie value carrying ``token``: the token itself, or
    ``token.mac`` when signing keys are set."""
    if not options.keys:
        return token
    return f"{token}.{_mac(options.keys[0], options.cookie_name, token)}"


@dataclass(frozen=True)
class Decoded:
    token: str | None  # None: no cookie, or one to refuse
    present: bool  # a cookie of ours came (valid or not)
    stale_key: bool = False  # signed with an older key: sign it again


def decode(options: SessionOptions, cookie_header: str | None) -> Decoded:
    """The token in the request's ``Cookie`` header, checked with no Redis
    call: a token of the wrong shape, or a signature no key makes, is None.
    When the cookie comes more than once (another path or domain set one
    too), the first valid one wins: browsers send the most specific first."""
    values = _values(cookie_header or "", options.cookie_name)
    for value in values:
        token, stale = _verify(options, value)
        if token is not None:
            return Decoded(token, True, stale)
    return Decoded(None, bool(values))


def _values(header: str, name: str) -> list[str]:
    # By hand rather than with a cookie parser: they keep one value per
    # name, and the one they keep may be another path's stale cookie.
    found = []
    for pair in header.split(";"):
        key, sep, value = pair.partition("=")
        if sep and key.strip() == name:
            found.append(value.strip())
    return found


def _verify(options: SessionOptions, value: str) -> tuple[str | None, bool]:
    """(the token, signed with an older key) if ``value`` is a valid cookie."""
    if not options.keys:
        # Only tokens webtier issues, whatever the tier's strict setting.
        return (value if is_token(value) else None), False
    token, _, mac = value.partition(".")
    # Shape first: compare_digest refuses non-ASCII strings.
    if not is_token(token) or not _MAC.fullmatch(mac):
        return None, False
    for index, key in enumerate(options.keys):
        if hmac.compare_digest(mac, _mac(key, options.cookie_name, token)):
            return token, index > 0
    return None, False


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a Host header: name or address, maybe a port) names
    this machine."""
    if host.startswith("["):
        name = host[1 : host.find("]")] if "]" in host else host
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    name = name.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Where:
    """What the cookie's attributes depend on in the request."""

    mount: str  # where the app is mounted: "" at the top
    scheme: str  # "http" or "https", as the server saw it
    host: str  # the Host header


def cookie_morsel(options: SessionOptions, where: Where, value: str | None) -> Morsel[str]:
    """The cookie carrying ``value`` (None: deleting it), with its attributes."""
    morsel: Morsel[str] = Morsel()
    morsel.set(options.cookie_name, value or "", value or "")
    morsel["path"] = options.path or where.mount or "/"
    if options.domain:
        morsel["domain"] = options.domain
    # Not readable from scripts (XSS cannot steal it), not sent cross-site
    # on subrequests or POSTs (CSRF), never over plain http unless asked for
    # local development.
    morsel["httponly"] = True
    morsel["samesite"] = options.same_site.capitalize()
    local = where.scheme == "http" and is_loopback(where.host)
    if not (options.insecure_local_http and local):
        morsel["secure"] = True
    if value is None:
        morsel["max-age"] = 0
        morsel["expires"] = "Thu, 01 Jan 1970 00:00:00 GMT"
    elif options.max_age is not None:
        morsel["max-age"] = options.max_age
    return morsel


# -- outages -----------------------------------------------------------------------------------


class OutageLog:
    """Logs Redis being unreachable: the first failure at once, then at most
    one line per ``every`` seconds with the count meanwhile, never a line
    per request."""

    def __init__(self, every: float) -> None:
        self._throttle = Throttle(every)

    def failed(self, error: WebtierError, outcome: str) -> None:
        if missed := self._throttle.due():
            log.warning(
                "session store unreachable (%d requests since the last report, %s): %s",
                missed,
                outcome,
                error,
            )


UNAVAILABLE_BODY = b"Service unavailable: the session store cannot be reached. Retry shortly.\n"


def unavailable_headers(options: SessionOptions) -> list[tuple[str, str]]:
    """Headers of the 503 answered when the session is needed but Redis is away."""
    return [
        ("content-type", "text/plain; charset=utf-8"),
        ("content-length", str(len(UNAVAILABLE_BODY))),
        ("retry-after", str(options.retry_after)),
        ("cache-control", "no-store"),
    ]


class Middleware:
    """What every adapter keeps: its options and outage log; it reads the
    request's cookie into a :class:`SessionState`, and logs the 503s."""

    def __init__(
        self, tier: Any, options: SessionOptions | None, settings: Mapping[str, Any]
    ) -> None:
        self.tier = tier
        self.options = options or SessionOptions(**settings)
        self.outages = OutageLog(self.options.log_every)
        # Touch often enough that a session in use never reaches the tier's
        # idle timeout between two touches.
        idle = tier.config.sessions.idle_timeout
        self.refresh_after = min(self.options.refresh_after, idle / 2 if idle else math.inf)

    def state(self, cookie_header: str | None) -> SessionState:
        state = SessionState.from_cookie(self.options, self.outages, cookie_header)
        state.refresh_after = self.refresh_after
        return state

    def unavailable(self, error: RedisUnavailable) -> list[tuple[str, str]]:
        """Logs the outage; the headers of the 503 (body: UNAVAILABLE_BODY)."""
        self.outages.failed(error, "answered 503")
        return unavailable_headers(self.options)


# -- the session's logic -------------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """A tier call a flow waits for: ``tier.<part>.<method>(*args, **kwargs)``."""

    part: str
    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


Flow: TypeAlias = Generator[Ask, Any, T]


@dataclass
class SessionState:
    """One request's view of its session."""

    options: SessionOptions
    outages: OutageLog
    token: str | None  # the cookie's token (checked shape and signature), or the new one
    refresh_after: float = 60.0  # seconds: a read of a session idle this long touches it
    cookie_came: bool = False  # a cookie of ours came with the request
    resign: bool = False  # it was signed with an older key
    loaded: bool = False
    user: str | None = None
    degraded: RedisUnavailable | None = None  # anonymous because Redis is away
    cookie: Literal["keep", "set", "clear"] = "keep"
    headers_sent: bool = False

    @classmethod
    def from_cookie(
        cls, options: SessionOptions, outages: OutageLog, header: str | None
    ) -> SessionState:
        found = decode(options, header)
        state = cls(
            options, outages, found.token, cookie_came=found.present, resign=found.stale_key
        )
        if found.present and found.token is None:
            state.cookie = "clear"  # garbled or forged: the browser may stop sending it
        return state

    @property
    def accessed(self) -> bool:
        return self.loaded

    def cookie_to_send(self, where: Where) -> Morsel[str] | None:
        """The cookie the response sets (or deletes), if any; after this the
        cookie can no longer change."""
        self.headers_sent = True
        if self.cookie == "set" and self.token is not None:
            return cookie_morsel(self.options, where, encode(self.options, self.token))
        if self.cookie == "clear":
            return cookie_morsel(self.options, where, None)
        return None

    def response_headers(self, where: Where) -> list[tuple[str, str]]:
        """The headers the response gets for this session; marks them sent."""
        headers = []
        cookie = self.cookie_to_send(where)
        if cookie is not None:
            headers.append(("set-cookie", cookie.OutputString()))
            if cookie.value:
                # A response carrying a session token must never sit in a shared cache.
                headers.append(("cache-control", "no-store"))
        if self.accessed:
            headers.append(("vary", "Cookie"))  # the page depends on who asks
        return headers


def load(state: SessionState) -> Flow[str | None]:
    """The session's user, read once per request. A session idle for
    ``refresh_after`` is touched."""
    if state.loaded:
        return state.user
    state.loaded = True
    if state.token is None:
        return None
    try:
        info = yield Ask("sessions", "info", (state.token,))
        idle = None if info is None else time.time() - float(info.last_seen)
        if idle is not None and idle >= state.refresh_after:
            alive = yield Ask("sessions", "touch", (state.token,))
            info = info if alive else None
    except RedisUnavailable as error:
        if state.options.on_outage == "fail":
            state.loaded = False
            raise
        state.outages.failed(error, "served as anonymous")
        state.degraded = error
        return None
    if info is None:
        # Not cleared: the cookie may be one a concurrent login just rotated,
        # and deleting it here would log the visitor out of the new one.
        state.token = None
        return None
    if state.resign:
        state.cookie = "set"
    state.user = info.user
    return state.user


def _live(state: SessionState) -> Flow[str | None]:
    """The live session's token, or None (anonymous)."""
    yield from load(state)
    return None if state.degraded else state.token


def _ensure(state: SessionState) -> Flow[str]:
    """The live session's token, creating the session (and its cookie) on
    the first write."""
    yield from load(state)
    if state.degraded:
        raise state.degraded  # writes need the store
    if state.token is None:
        _cookie_can_change(state)
        state.token = yield Ask("sessions", "new")
        state.cookie = "set"
    return state.token


def _cookie_can_change(state: SessionState) -> None:
    if state.headers_sent:
        raise LateCookie("the response has started: the session cookie can no longer change")


def user(state: SessionState) -> Flow[str | None]:
    return (yield from load(state))


def data(state: SessionState) -> Flow[dict[str, Any]]:
    token = yield from _live(state)
    return {} if token is None else (yield Ask("sessions", "data", (token,)))


def get(state: SessionState, name: str, default: Any = None) -> Flow[Any]:
    return (yield from data(state)).get(name, default)


def _write(state: SessionState, ask: Callable[[str], Ask]) -> Flow[Any]:
    """Runs the write ``ask(token)`` on the session, creating it first if
    needed. A session that ended since it was looked up (revoked, expired)
    is forgotten and the write goes to a new one, as for a new visitor."""
    token = yield from _ensure(state)
    try:
        return (yield ask(token))
    except UnknownSession:
        _forget(state)
    token = yield from _ensure(state)
    return (yield ask(token))


def _forget(state: SessionState) -> None:
    state.token, state.user = None, None


def update(state: SessionState, values: Mapping[str, Any]) -> Flow[None]:
    yield from _write(state, lambda token: Ask("sessions", "update", (token, dict(values))))


def discard(state: SessionState, *names: str) -> Flow[None]:
    token = yield from _live(state)
    if token is not None:
        yield Ask("sessions", "discard", (token, *names))


def recently_viewed(state: SessionState) -> Flow[list[str]]:
    token = yield from _live(state)
    return [] if token is None else (yield Ask("sessions", "recently_viewed", (token,)))


def record_view(state: SessionState, item: str) -> Flow[None]:
    """Pushes ``item`` onto the session's recently viewed and counts the
    view for the ranking, in one round trip. Served as anonymous during an
    outage, the view is dropped (logged) rather than failing the page.
    The view is counted once: a touch counts it only for a live session,
    and one whose count alone failed (the ranking's node away, on Cluster)
    is not repeated."""
    try:
        token = yield from _ensure(state)
    except RedisUnavailable:
        if state.degraded is None:
            raise
        return
    try:
        if not (yield Ask("sessions", "touch", (token,), {"item": item})):
            _forget(state)  # the session ended meanwhile: the view goes to a new one
            token = yield from _ensure(state)
            yield Ask("sessions", "touch", (token,), {"item": item})
    except PartiallyApplied as error:
        if "session" not in error.applied:
            raise
        state.outages.failed(error, "view not counted")


def cart(state: SessionState) -> Flow[dict[str, int]]:
    token = yield from _live(state)
    return {} if token is None else (yield Ask("carts", "get", (token,)))


def set_cart(state: SessionState, item: str, count: int) -> Flow[None]:
    """Sets the count of ``item`` in the cart (0 or less removes it)."""
    yield from _write(state, lambda token: Ask("carts", "set", (token, item, count)))


def clear_cart(state: SessionState) -> Flow[None]:
    token = yield from _live(state)
    if token is not None:
        yield Ask("carts", "clear", (token,))


def login(
    state: SessionState, user: str, cart_policy: CartPolicy = "add"
) -> Flow[LoginResult | None]:
    """Logs ``user`` in under a new token (the old one dies at once; data,
    cart and viewed items carry over, the anonymous cart merged into the
    user's by ``cart_policy``) and sends its cookie. Returns the tier's
    :class:`~webtier.sessions.LoginResult` (with the cart changes), or None
    when there was no session to carry over."""
    token = yield from _live(state)
    if state.degraded:
        raise state.degraded
    _cookie_can_change(state)
    result = None
    if token is not None:
        try:
            result = yield Ask("sessions", "login", (token, user), {"cart_policy": cart_policy})
        except UnknownSession:
            _forget(state)
    if result is None:
        state.token = yield Ask("sessions", "new", (), {"user": user})
    else:
        state.token = result.token
    state.user, state.cookie = user, "set"
    return result


def logout(state: SessionState) -> Flow[None]:
    """Ends the session in Redis and clears the cookie."""
    _cookie_can_change(state)
    token = state.token
    if token is not None:
        yield Ask("sessions", "logout", (token,))
    state.loaded, state.token, state.user = True, None, None
    if state.cookie_came or token is not None:
        state.cookie = "clear"


# -- driving flows ---------------------------------------------------------------------------------


def _call(tier: Any, ask: Ask) -> Any:
    return getattr(getattr(tier, ask.part), ask.method)(*ask.args, **ask.kwargs)


def drive(tier: Any, flow: Flow[T]) -> T:
    """Runs ``flow`` on a sync tier; tier errors are thrown back into it."""
    reply: Any = None
    error: WebtierError | None = None
    while True:
        try:
            ask = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            reply, error = _call(tier, ask), None
        except WebtierError as failure:
            reply, error = None, failure


async def drive_async(tier: Any, flow: Flow[T]) -> T:
    """Runs ``flow`` on an asyncio tier."""
    reply: Any = None
    error: WebtierError | None = None
    while True:
        try:
            ask = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            reply, error = await _call(tier, ask), None
        except WebtierError as failure:
            reply, error = None, failure


def sync_method(
    flow: Callable[Concatenate[SessionState, P], Flow[T]],
) -> Callable[Concatenate[Any, P], T]:
    """A method of the sync session object running ``flow``."""

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return drive(self._tier, flow(self._state, *args, **kwargs))

    method.__name__, method.__doc__ = flow.__name__, flow.__doc__
    return method


def async_method(
    flow: Callable[Concatenate[SessionState, P], Flow[T]],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
    """A method of the asyncio session object running ``flow``."""

    async def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await drive_async(self._tier, flow(self._state, *args, **kwargs))

    method.__name__, method.__doc__ = flow.__name__, flow.__doc__
    return method


def header_values(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The ``name`` header of an ASGI request, its repeats joined as RFC 9110 says."""
    found = [value.decode("latin-1") for key, value in headers if key.lower() == name]
    return "; ".join(found) if found else None


def merge_headers(
    existing: list[tuple[str, str]], extra: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The response's headers with the session's added; the session's
    ``Cache-Control`` replaces the response's own."""
    replaced = {name for name, _ in extra if name == "cache-control"}
    return [(k, v) for k, v in existing if k.lower() not in replaced] + extra
