"""Session tokens: how webtier issues them and which it accepts.

The values and errors of ``tier.sessions`` and ``tier.carts`` live in
:mod:`webtier.types` and :mod:`webtier.errors`.

Tokens are issued by :func:`new_token` (``secrets.token_urlsafe(32)``, 256
bits); in strict mode (the default) only tokens of that form are accepted,
and :meth:`tier.sessions.touch` never creates a session, so a token an
attacker picked can never become one (session fixation). See docs/sessions.md.
"""

from __future__ import annotations

import re
import secrets
from typing import Final, Literal

from webtier.errors import BadToken

TOKEN_BYTES: Final = 32  # 256 bits of randomness per token
# secrets.token_urlsafe(32): 43 characters of the URL-safe base64 alphabet.
_ISSUED = re.compile(r"[A-Za-z0-9_-]{43}")
# Tokens callers issue themselves (the book's str(uuid.uuid4())) when strict is off.
_ANY = re.compile(r"[A-Za-z0-9_-]{16,128}")

CartPolicy = Literal["add", "replace", "keep_larger"]
CART_POLICIES: Final = ("add", "replace", "keep_larger")


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
