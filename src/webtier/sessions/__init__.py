"""Login sessions, recently viewed items and carts (Redis in Action 2.1,
2.2), one package:

- ``tokens``: how webtier issues session tokens and which it accepts;
- ``layout``: where a session lives, its keys, the user index, the scripts;
- ``ops``: new, check, touch, info, data and viewed items; ``users``: login
  rotation and cart merge, logout, a user's sessions; ``cleaner``: choosing
  and removing stale sessions without the book's race; ``carts``: the
  carts, in the session's own hash: all I/O-free generators;
- ``session_*.lua``, ``cart_*.lua`` (and ``session_prelude.lua``, what the
  session scripts share): their scripts;
- ``aio``: the ``tier.sessions`` and ``tier.carts`` parts; ``sync``: their
  sync twins, generated from ``aio``.

The web middlewares that keep a session behind a cookie are
:mod:`webtier.web.sessions`; see docs/sessions.md.
"""

from webtier.sessions.tokens import (
    CART_POLICIES,
    TOKEN_BYTES,
    CartPolicy,
    check_token,
    is_token,
    new_session_id,
    new_token,
)

__all__ = [
    "CART_POLICIES",
    "TOKEN_BYTES",
    "CartPolicy",
    "check_token",
    "is_token",
    "new_session_id",
    "new_token",
]
