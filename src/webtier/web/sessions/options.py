"""How the session middlewares handle the cookie and outages: their options."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from http.cookies import Morsel
from typing import Literal

from webtier._core.deadline import check_limit
from webtier.errors import ConfigError

DEFAULT_COOKIE = "webtier_session"
# The key where adapters leave the session: in the ASGI scope and the WSGI
# environ (Starlette also gets ``request.state.session``, Django
# ``request.webtier_session``).
SESSION_KEY = "webtier.session"

MIN_KEY_BYTES = 32


@dataclass(frozen=True)
class SessionOptions:
    """How the session middlewares handle the cookie and outages.

    ``path=None`` scopes the cookie to where the app is mounted (ASGI
    ``root_path``, WSGI ``SCRIPT_NAME``), ``/`` at the top. ``max_age`` is how
    long the browser keeps the cookie (seconds; ``None``: until it closes);
    the server's idle and absolute timeouts decide how long the session
    lives. ``signing_keys``: HMAC-SHA256 keys of at least 32 bytes, the first
    signs, all verify (rotation: put the new key first, drop the old one once
    its cookies are gone). ``insecure_local_http`` (on by default) drops the
    ``Secure`` flag, logging once why, for local development only: plain
    http to a loopback host (``localhost``, ``*.localhost``, ``127.0.0.0/8``,
    ``::1``) from no remote address and through no proxy (no ``Forwarded``
    or ``X-Forwarded-*`` header); every other request gets ``Secure``. Set
    it False to send ``Secure`` always (e.g. behind a proxy on this machine
    that forwards a loopback Host and no proxy header).
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
    insecure_local_http: bool = True
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
        if any(len(key) < MIN_KEY_BYTES for key in keys):
            raise ConfigError(f"signing_keys: each key needs at least {MIN_KEY_BYTES} bytes")
        if self.on_outage not in ("fail", "anonymous"):
            raise ConfigError(f"on_outage: 'fail' or 'anonymous' (got {self.on_outage!r})")
        if self.max_age is not None and self.max_age <= 0:
            raise ConfigError("max_age: seconds > 0, or None for a browser-session cookie")
        if self.retry_after < 0 or self.refresh_after < 0 or self.log_every < 0:
            raise ConfigError("retry_after, refresh_after and log_every: seconds >= 0")
        check_limit(self.time_limit, "time_limit")
