"""Shopping carts (Redis in Action 2.2): item -> count, per session.

A cart's lines are fields ``k:<item>`` of the session's own hash (see
:mod:`webtier.sessions.layout`): a cart expires and is cleaned with its session
and cannot outlive it, so no cleaner can leave an orphaned cart behind.
"""

from __future__ import annotations

from webtier._core.checks import check_integer
from webtier._core.keys import check_name
from webtier._core.protocol import Op, Request, ScriptCall, read, write
from webtier._core.scripts import Script
from webtier.config import Config
from webtier.errors import CartLimit, UnknownSession
from webtier.sessions.layout import Place, fields_of, place
from webtier.sessions.ops import touch_request
from webtier.sessions.tokens import new_session_id
from webtier.sessions.users import cart_of

SET = Script.load(__package__, "cart_set")
CLEAR = Script.load(__package__, "cart_clear")


def _check_count(cfg: Config, count: object) -> int:
    value = check_integer("count", count)
    most = cfg.sessions.cart_count
    if value > most:
        raise CartLimit("count", f"must be at most {most} of one item", count)
    return value


def _maybe_create(cfg: Config, where: Place) -> tuple[Request, ...]:
    # The book keeps carts apart from sessions, so add_to_cart works on any
    # session id: outside strict mode, a cart write creates a missing session.
    if cfg.sessions.strict:
        return ()
    return (touch_request(cfg, where, "any", None, None, new_session_id()),)


def set(cfg: Config, token: str, item: str, count: int) -> Op[None]:
    """Set ``item``'s count in the session's cart; ``count <= 0`` removes it
    (the book's ``add_to_cart``). Raises :class:`~webtier.errors.CartLimit`
    past the per-line or per-cart limits, and
    :class:`~webtier.errors.UnknownSession` without a live session."""
    where = place(cfg, token)
    check_name("item", item)
    value = _check_count(cfg, count)
    call = ScriptCall(SET, (where.key,), (item, value, cfg.sessions.cart_lines))
    request = write(where.route, call, idempotent=True)
    created = _maybe_create(cfg, where)
    if created:
        request = write(where.route, *created[0].commands, call, idempotent=False)
    ((*_, reply),) = yield (request,)
    status = int(reply[0])
    if status == 0:
        raise UnknownSession("no live session has this token")
    if status == -1:
        raise CartLimit("item", f"the cart already holds {int(reply[1])} lines (the limit)", item)


def get(cfg: Config, token: str) -> Op[dict[str, int]]:
    """The session's cart, item -> count ({} without a live session)."""
    where = place(cfg, token)
    (reply,) = yield read(where.route, ("HGETALL", where.key))
    return cart_of(fields_of(reply))


def clear(cfg: Config, token: str) -> Op[None]:
    """Empty the session's cart."""
    where = place(cfg, token)
    yield write(where.route, ScriptCall(CLEAR, (where.key,), ()), idempotent=True)
