"""Sessions and carts: the values and errors of ``tier.sessions`` and ``tier.carts``.

Tokens are issued by :func:`new_token` (``secrets.token_urlsafe(32)``, 256
bits); in strict mode (the default) only tokens of that form are accepted,
and :meth:`tier.sessions.touch` never creates a session, so a token an
attacker picked can never become one (session fixation). See docs/sessions.md.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Final, Literal

from webtier.errors import InvalidInput, WebtierError

TOKEN_BYTES: Final = 32  # 256 bits of randomness per token
# secrets.token_urlsafe(32): 43 characters of the URL-safe base64 alphabet.
_ISSUED = re.compile(r"[A-Za-z0-9_-]{43}")
# Tokens callers issue themselves (the book's str(uuid.uuid4())) when strict is off.
_ANY = re.compile(r"[A-Za-z0-9_-]{16,128}")

CartPolicy = Literal["add", "replace", "keep_larger"]
CART_POLICIES: Final = ("add", "replace", "keep_larger")


class BadToken(InvalidInput):
    """The token is not one webtier could have issued; nothing was sent."""


class UnknownSession(WebtierError, LookupError):
    """No live session has this token (never issued, logged out, expired or
    cleaned); nothing was written."""


class UserMismatch(WebtierError):
    """The session belongs to another user: switching users goes through
    ``login`` (which rotates the token); nothing was written."""


class DataTooLarge(InvalidInput):
    """A session data value, or all of them together, would exceed the
    configured size or field limits; nothing was written."""


class CartLimit(InvalidInput):
    """A cart line count or the number of lines would exceed the configured
    limits; nothing was written."""


def new_token() -> str:
    """A fresh session token: 256 random bits, URL-safe (43 characters)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def new_session_id() -> str:
    """The public id of a session (listed per user, used to revoke one): not
    the token, so listing sessions never reveals one."""
    return secrets.token_urlsafe(9)


def is_token(token: object, *, strict: bool = True) -> bool:
    """Whether ``token`` has the form of a token (strict: one webtier issues)."""
    pattern = _ISSUED if strict else _ANY
    return isinstance(token, str) and pattern.fullmatch(token) is not None


def check_token(token: object, *, strict: bool = True) -> str:
    """Return ``token`` if it has the form of a token, else raise :class:`BadToken`
    (before any key is built from it)."""
    if not is_token(token, strict=strict):
        form = "43 URL-safe characters" if strict else "16-128 URL-safe characters"
        raise BadToken("token", f"is not a session token ({form})", token)
    return token  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str  # the session's public id: stable across login rotation, not the token
    user: str | None  # None while anonymous
    created: float  # seconds since the epoch (server clock)
    last_seen: float  # seconds since the epoch (server clock); never moves backwards


@dataclass(frozen=True, slots=True)
class CartChange:
    """One line of the user's cart that a login merge changed."""

    item: str
    before: int  # the user's count before the merge (0: not in the cart)
    after: int  # the count now (0: dropped)


@dataclass(frozen=True, slots=True)
class LoginResult:
    token: str  # the new token; the old one is dead
    cart_changes: tuple[CartChange, ...]  # how the user's cart changed, by item


@dataclass(frozen=True, slots=True)
class CleanReport:
    """What one cleaner pass did."""

    deleted: int  # sessions removed (over the limit, idle or past the backstop)
    # chosen, but touched (or removed by another cleaner) before the removal;
    # when chosen by a threshold, of those surely there when picked
    spared: int
    remaining: int  # sessions in the recency indexes when the pass ended
    steps: int
    seconds: float
    more: bool  # stopped at max_steps with work left


@dataclass(frozen=True, slots=True)
class SessionStats:
    """The session store at a glance, from the recency indexes."""

    sessions: int  # listed in the recency indexes (expired ones until cleaned)
    busiest_shard: int  # sessions in the fullest shard (spread check)
    oldest: float | None  # least recent last-seen, seconds since the epoch
    newest: float | None  # most recent last-seen
