"""Logging in and out, and the account page (the user's sessions)."""

from __future__ import annotations

import datetime as dt
import re

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from webtier.demo.shop.context import notify, session_of, shop_of
from webtier.types import LoginResult

# A demo shop: no password, but a name that reads well everywhere it shows.
USERNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")


def _see(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


async def login_form(request: Request) -> Response:
    shop = shop_of(request)
    return shop.page(request, "login.html", await shop.visitor(request))


def merge_report(user: str, result: LoginResult | None) -> str:
    """What the login did to the carts, in one sentence."""
    changes = () if result is None else result.cart_changes
    if not changes:
        return f"Welcome, {user}."
    if not any(change.before for change in changes):
        return f"Welcome, {user}. Your cart came with you."
    shown = ", ".join(
        f"item {c.item}: {c.before} \u2192 {c.after}"
        for c in sorted(changes, key=lambda c: (len(c.item), c.item))
    )
    return f"Welcome, {user}. Your cart was merged into your account's: {shown}."


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
    result = await session.login(username)
    await notify(session, merge_report(username, result))
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
    shown = [
        {
            "id": s.id,
            "created": _when(s.created),
            "last_seen": _when(s.last_seen),
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
