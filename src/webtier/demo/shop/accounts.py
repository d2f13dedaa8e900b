"""Logging in and out, and the account page (the user's sessions)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from webtier.demo.shop.context import notify, session_of, shop_of
from webtier.types import CartChange

# A demo shop: no password, but a name that reads well everywhere it shows.
USERNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")


def _see(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


async def login_form(request: Request) -> Response:
    shop = shop_of(request)
    return shop.page(request, "login.html", await shop.visitor(request))


def merge_report(
    user: str,
    visit: Mapping[str, int],
    merged: Mapping[str, int],
    changes: tuple[CartChange, ...] = (),
) -> str:
    """What the login did to the carts, in one sentence: every line that
    changed on either side, the cart of this visit (``visit``, before the
    login) or the account's (``changes``: its lines the merge changed), with
    where its count came from. ``merged`` is the cart after the login."""
    account = {item: merged.get(item, 0) for item in {*visit, *merged}}
    account |= {change.item: change.before for change in changes}
    lines = []
    for item in sorted(account, key=lambda item: (len(item), item)):
        here, there, now = visit.get(item, 0), account[item], merged.get(item, 0)
        if here == there == now:
            continue  # the same on both sides before and after
        sides = ((here, "this visit"), (there, "your account"))
        sources = [f"{count} from {side}" for count, side in sides if count]
        counted = f"\u00d7{now}" if now else "removed"
        lines.append(f"item {item} {counted} ({' + '.join(sources)})")
    if not lines:
        return f"Welcome, {user}."
    if not any(account.values()) and dict(merged) == dict(visit):
        return f"Welcome, {user}. Your cart came with you: {', '.join(lines)}."
    return f"Welcome, {user}. Your cart and your account's were merged: {', '.join(lines)}."


async def login(request: Request) -> Response:
    """Form field ``username``. The session's token is replaced (the old
    cookie is dead at once) and its cart merged into the user's."""
    shop = shop_of(request)
    username = str((await request.form()).get("username", "")).strip()
    if not USERNAME.fullmatch(username):
        return await shop.problem(
            request,
            400,
            "Not a username",
            "A username is 1 to 40 letters, digits, '.', '_' or '-', starting with a letter "
            "or digit.",
        )
    session = session_of(request)
    visit = await session.cart()
    result = await session.login(username)
    merged = await session.cart() if result is not None else {}
    changes = () if result is None else result.cart_changes
    await notify(session, merge_report(username, visit, merged, changes))
    return _see("/")


async def logout(request: Request) -> Response:
    await session_of(request).logout()
    return _see("/")


async def account(request: Request) -> Response:
    """The user's live sessions, most recently seen first."""
    shop = shop_of(request)
    visitor = await shop.visitor(request)
    if visitor.user is None:
        return _see("/login")
    sessions = await shop.tier.sessions.of_user(visitor.user)
    own = await session_of(request).session_id()
    shown = [
        {
            "id": s.id,
            "created": _when(s.created),
            "last_seen": _when(s.last_seen),
            "yours": s.id == own,
        }
        for s in sessions
    ]
    return shop.page(request, "account.html", visitor, sessions=shown)


async def logout_everywhere(request: Request) -> Response:
    """End every session of the user, this one included."""
    shop = shop_of(request)
    session = session_of(request)
    user = await session.user()
    await session.logout()
    if user is not None:
        await shop.tier.sessions.revoke_all(user)
    return _see("/")


def _when(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
