"""The ASGI session middleware on real Starlette apps, through httpx and
through a real uvicorn server, on every Redis target."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

import webtier
from tests.helpers.servers import BINARIES, all_keys, commands_served, stall, target_servers
from tests.helpers.web import (
    COOKIE,
    KEY,
    OLD_KEY,
    cookie_value,
    fastapi_shop,
    set_cookies,
    starlette_shop,
    uvicorn_serving,
    visit,
)
from webtier.config import RetryPolicy
from webtier.testing import RedisServer
from webtier.web.sessions import SessionOptions
from webtier.web.sessions.cookie import encode

pytestmark = pytest.mark.anyio


@pytest.fixture
def atier(async_client: Any, config: webtier.Config) -> webtier.AsyncWebTier:
    return webtier.AsyncWebTier(async_client, config)


@contextlib.asynccontextmanager
async def shop_client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://shop.test") as http:
        yield http


async def test_a_shopper_visits_a_starlette_shop(
    atier: webtier.AsyncWebTier, redis_url: str, prefix: str
) -> None:
    async with shop_client(starlette_shop(atier)) as http:
        await http.get("/home")
        assert all_keys(redis_url, f"{prefix}:*") == []  # lazy: nothing written
        await visit(http)
    # The views were counted for the ranking too.
    assert await atier.ranking.rank("book") is not None


async def test_a_shopper_visits_a_fastapi_shop(atier: webtier.AsyncWebTier) -> None:
    async with shop_client(fastapi_shop(atier, signing_keys=[KEY])) as http:
        await visit(http)


async def test_signed_cookies_work_and_rotate_keys(atier: webtier.AsyncWebTier) -> None:
    async with shop_client(starlette_shop(atier, signing_keys=[KEY])) as http:
        seen = await visit(http)
        assert seen["first"].count(".") == 1
    # A cookie signed with a key being retired still works, and comes back
    # signed with the new key.
    async with shop_client(starlette_shop(atier, signing_keys=[OLD_KEY])) as http:
        [old] = set_cookies((await http.post("/data/a/1")).headers)
    rotated = starlette_shop(atier, signing_keys=[KEY, OLD_KEY])
    async with shop_client(rotated) as http:
        response = await http.get("/me", headers={"cookie": f"{COOKIE}={cookie_value(old)}"})
        assert response.json()["data"] == {"a": "1"}
        [resigned] = set_cookies(response.headers)
        token = cookie_value(old).split(".")[0]
        assert cookie_value(resigned) == encode(SessionOptions(signing_keys=[KEY]), token)


async def test_forged_cookies_are_refused_before_any_redis_call(
    atier: webtier.AsyncWebTier, target: str, request: pytest.FixtureRequest
) -> None:
    servers = target_servers(target, request)
    async with shop_client(starlette_shop(atier, signing_keys=[KEY])) as http:
        [real] = set_cookies((await http.post("/cart/book/1")).headers)
        token, mac = cookie_value(real).split(".")
        forged = [
            f"{token}.{'A' * 43}",  # a real token, a made-up signature
            token,  # unsigned
            f"{token[:-1]}{'B' if token[-1] != 'B' else 'C'}.{mac}",  # another token, its MAC
            "garbage",
            "x" * 4000,
        ]
        before = commands_served(servers)
        for value in forged:
            response = await http.get("/me", headers={"cookie": f"{COOKIE}={value}"})
            assert response.json()["user"] is None
            assert response.json()["cart"] == {}
            [cleared] = set_cookies(response.headers)
            assert cookie_value(cleared) == ""
        # A page that never asks for the session costs nothing either, even
        # with a valid cookie.
        assert (await http.get("/home", headers={"cookie": real.split(";")[0]})).text == "home"
        assert commands_served(servers) == before
        # The real cookie still works.
        response = await http.get("/me", headers={"cookie": f"{COOKIE}={cookie_value(real)}"})
        assert response.json()["cart"] == {"book": 1}


async def test_a_login_after_the_response_started_is_refused(atier: webtier.AsyncWebTier) -> None:
    async with shop_client(starlette_shop(atier)) as http:
        response = await http.post("/late-login")
        assert response.text == "started refused"
        assert set_cookies(response.headers) == []


# -- a real server ---------------------------------------------------------------------------


def served_shop(redis_url: str, config: webtier.Config, **options: Any) -> Starlette:
    """The shop on a client of its own: it connects in the server's loop (on
    first use), and is closed there when the server stops."""
    client = webtier.connect_async(redis_url)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await client.aclose()

    return starlette_shop(webtier.AsyncWebTier(client, config), lifespan=lifespan, **options)


async def test_a_shopper_visits_over_http_served_by_uvicorn(
    redis_url: str, config: webtier.Config
) -> None:
    # Plain http to 127.0.0.1: local development, the only place Secure goes
    # by default.
    app = served_shop(redis_url, config)
    with uvicorn_serving(app) as base:
        async with httpx.AsyncClient(base_url=base) as http:
            await visit(http, secure=False)
            # Through a proxy, the http is the proxy's: Secure.
            response = await http.post("/view/book", headers={"x-forwarded-proto": "https"})
            assert "secure" in response.headers["set-cookie"].lower()
    app = served_shop(redis_url, config, insecure_local_http=False)
    with uvicorn_serving(app) as base:
        async with httpx.AsyncClient(base_url=base) as http:
            response = await http.post("/view/book")
            assert "secure" in response.headers["set-cookie"].lower()


async def test_a_login_holds_under_a_test_client_on_plain_http(
    atier: webtier.AsyncWebTier,
) -> None:
    # httpx's cookie jar, as a browser, keeps a Secure cookie off plain http.
    transport = httpx.ASGITransport(app=starlette_shop(atier))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        await http.post("/login/ann")
        assert (await http.get("/me")).json()["user"] == "ann"


# -- outages -----------------------------------------------------------------------------------


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    with RedisServer.start(BINARIES["standalone"]) as running:
        yield running


def outage_shop(server: RedisServer, prefix: str, **options: Any) -> tuple[Starlette, Any]:
    client = webtier.connect_async(server.url, socket_timeout=0.5)
    retry = RetryPolicy(attempts=2, backoff=0.01, backoff_cap=0.05)
    tier = webtier.AsyncWebTier(client, webtier.Config(prefix=prefix, retry=retry))
    return starlette_shop(tier, **options), client


async def test_an_outage_answers_503_to_requests_needing_the_session(
    own_server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    app, client = outage_shop(own_server, prefix)
    async with shop_client(app) as http:
        [cookie] = set_cookies((await http.post("/cart/book/1")).headers)
        own_server.kill()
        with caplog.at_level(logging.WARNING, logger="webtier.sessions"):
            for _ in range(3):
                assert (await http.get("/home")).status_code == 200  # needs no session
                response = await http.get("/me", headers={"cookie": cookie.split(";")[0]})
                assert response.status_code == 503
                assert response.headers["retry-after"] == "5"
                assert "Traceback" not in response.text
                assert "session store" in response.text
                assert set_cookies(response.headers) == []  # the cookie is kept
                assert (await http.post("/view/pen")).status_code == 503
        # Logged once, not once per request.
        assert len([r for r in caplog.records if r.name == "webtier.sessions"]) == 1
        own_server.launch()
    await client.aclose()


async def test_an_outage_can_serve_visitors_as_anonymous(
    own_server: RedisServer, prefix: str
) -> None:
    app, client = outage_shop(own_server, prefix, on_outage="anonymous")
    async with shop_client(app) as http:
        [cookie] = set_cookies((await http.post("/cart/book/1")).headers)
        own_server.kill()
        response = await http.get("/me", headers={"cookie": cookie.split(";")[0]})
        assert response.status_code == 200
        assert response.json() == {"user": None, "data": {}, "cart": {}, "viewed": []}
        assert set_cookies(response.headers) == []  # kept for when Redis is back
        assert (await http.post("/view/pen")).status_code == 200  # the view is dropped
        assert (await http.post("/cart/pen/1")).status_code == 503  # writes need Redis
        own_server.launch()
    await client.aclose()


async def test_a_stalled_server_answers_503_not_a_hang_or_a_500(
    own_server: RedisServer, prefix: str
) -> None:

    app, client = outage_shop(own_server, prefix)
    async with shop_client(app) as http:
        [cookie] = set_cookies((await http.post("/cart/book/1")).headers)
        sleeper = await asyncio.to_thread(stall, own_server, 3)
        response = await http.get("/me", headers={"cookie": cookie.split(";")[0]})
        assert response.status_code == 503
        await asyncio.to_thread(sleeper.join)
        response = await http.get("/me", headers={"cookie": cookie.split(";")[0]})
        assert response.json()["cart"] == {"book": 1}
    await client.aclose()
