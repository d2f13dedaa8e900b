"""What a request costs in Redis round trips through the session
middlewares (WSGI over a sync tier, ASGI over an asyncio one), counted on the
wire: each pipeline the tier sends is one ``send_packed_command`` on a redis-py
connection, sync or asyncio, standalone or Cluster. Counting commands (INFO
commandstats) would not do: a round trip is a pipeline, not a command.

A visitor without a cookie costs nothing; one with a live session costs one
round trip for every read of the request (the load: check, touch when due,
and the whole session), and one more per write."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from werkzeug.test import Client

import webtier
from tests.helpers.wire import Wire
from webtier.web import sessions
from webtier.web.sessions.cookie import encode

pytestmark = [pytest.mark.matrix, pytest.mark.anyio]

PAGE = {"user": "ann", "cart": {"book": 2}, "theme": "dark"}
BOUGHT = {**PAGE, "cart": {"book": 2, "pen": 1}}


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    return Wire(monkeypatch)


@pytest.fixture
def shopper(sync_client: Any, config: webtier.Config) -> str:
    """A live session of ``ann`` with a theme and a book in the cart."""
    tier = webtier.WebTier(sync_client, config)
    token = tier.sessions.new(user="ann")
    tier.sessions.update(token, {"theme": "dark"})
    tier.carts.set(token, "book", 2)
    return token


def cookie_of(token: str) -> str:
    return f"webtier_session={encode(sessions.SessionOptions(), token)}"


# -- the same pages, WSGI and ASGI ------------------------------------------------------------


def wsgi_shop(tier: webtier.WebTier, **options: Any) -> Any:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        session = sessions.session_of(environ)
        page = {"user": session.user(), "cart": session.cart(), "theme": session.get("theme")}
        if environ["PATH_INFO"] == "/buy":
            session.set_cart("pen", 1)
            page["cart"] = session.cart()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(page).encode()]

    return sessions.WSGIMiddleware(app, tier, **options)


def asgi_shop(tier: webtier.AsyncWebTier, **options: Any) -> Starlette:
    async def page(request: Request) -> JSONResponse:
        session = request.state.session
        shown = {
            "user": await session.user(),
            "cart": await session.cart(),
            "theme": await session.get("theme"),
        }
        if request.url.path == "/buy":
            await session.set_cart("pen", 1)
            shown["cart"] = await session.cart()
        return JSONResponse(shown)

    routes = [Route("/page", page), Route("/buy", page)]
    middleware = [Middleware(sessions.ASGIMiddleware, tier=tier, **options)]
    return Starlette(routes=routes, middleware=middleware)


class Shop:
    """One middleware and its tier, visited again and again: the first visit
    warms it up (connections opened, scripts loaded) and is not counted."""

    def __init__(self, api: str, redis_url: str, config: webtier.Config, **options: Any) -> None:
        self.api = api
        if api == "sync":
            self.client: Any = webtier.connect(redis_url)
            self.wsgi = Client(
                wsgi_shop(webtier.WebTier(self.client, config), **options), use_cookies=False
            )
        else:
            which = "redis-py" if api == "async-redispy" else "webtier"
            self.client = webtier.connect_async(redis_url, client=which)  # type: ignore[call-overload]
            self.asgi = asgi_shop(webtier.AsyncWebTier(self.client, config), **options)

    async def get(self, path: str, cookie: str | None = None) -> Any:
        headers = {"cookie": cookie} if cookie else {}
        if self.api == "sync":
            response = self.wsgi.get(path, headers=headers, base_url="https://shop.test")
            assert response.status_code == 200, response.text
            return response.json
        transport = httpx.ASGITransport(app=self.asgi)
        async with httpx.AsyncClient(transport=transport, base_url="https://shop.test") as http:
            answer = await http.get(path, headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.json()

    async def close(self) -> None:
        if self.api == "sync":
            webtier.disconnect(self.client)
        else:
            await self.client.aclose()


async def cost(wire: Wire, shop: Shop, path: str, cookie: str | None = None) -> tuple[Any, int]:
    """The page and its round trips, after a first visit that is not counted."""
    await shop.get(path, cookie)
    with wire.counting() as trips:
        page = await shop.get(path, cookie)
    return page, trips()


async def test_a_request_costs_one_round_trip_for_its_session_and_one_per_write(
    wire: Wire, shopper: str, api: str, redis_url: str, config: webtier.Config
) -> None:
    shop = Shop(api, redis_url, config)
    try:
        anonymous = {"user": None, "cart": {}, "theme": None}
        assert await cost(wire, shop, "/page") == (anonymous, 0)
        assert await cost(wire, shop, "/page", cookie_of(shopper)) == (PAGE, 1)
        assert await cost(wire, shop, "/buy", cookie_of(shopper)) == (BOUGHT, 2)
    finally:
        await shop.close()


async def test_a_session_due_for_its_touch_still_costs_one_round_trip(
    wire: Wire,
    shopper: str,
    api: str,
    redis_url: str,
    config: webtier.Config,
    sync_client: Any,
) -> None:
    shop = Shop(api, redis_url, config, refresh_after=0)  # every request touches
    tier = webtier.WebTier(sync_client, config)
    try:
        before = tier.sessions.info(shopper)
        assert await cost(wire, shop, "/page", cookie_of(shopper)) == (PAGE, 1)
        after = tier.sessions.info(shopper)
        assert before is not None
        assert after is not None
        assert after.last_seen > before.last_seen
    finally:
        await shop.close()
