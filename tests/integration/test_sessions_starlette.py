"""Starlette's ``request.session`` on webtier: webtier's ASGI session
middleware with ``scope_session=True``, and webtier's starsessions store
(``webtier.web.sessions.starsessions.Store``) under starsessions' own
middleware. starsessions' source distribution ships no tests: each store
test here names the test of alex-oleshkevich/starsessions (tests/) whose
behaviour of a backend it checks."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import httpx
import pytest
import redis.asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starsessions import SessionMiddleware, load_session, regenerate_session_id
from starsessions.stores.redis import RedisStore

import webtier
from tests.helpers.servers import BINARIES
from webtier.config import RetryPolicy, SessionSettings
from webtier.errors import ConfigError
from webtier.testing import RedisServer
from webtier.web import sessions
from webtier.web.sessions.starsessions import Store

pytestmark = pytest.mark.anyio

BASE = "https://testserver"  # starsessions' cookie is Secure
HEX_ID = "0123456789abcdef0123456789abcdef"  # as starsessions' generate_session_id makes them
PARALLEL = 200  # requests per client in the lost-update test, two clients at once


@pytest.fixture
def tier(async_client: Any, config: webtier.Config) -> Any:
    # Room for the lost-update test's 2 x PARALLEL keys: limits are the deployment's.
    limits = SessionSettings(max_fields=4 * PARALLEL, max_data_bytes=64 * 1024)
    return webtier.AsyncWebTier(async_client, dataclasses.replace(config, sessions=limits))


def routes(*, load: bool) -> list[Route]:
    """A Starlette app's views over ``request.session``; ``load``: call
    starsessions' ``load_session`` first."""

    async def loaded(request: Request) -> dict[str, Any]:
        if load:
            await load_session(request)
        return request.session

    async def get(request: Request) -> Response:
        return JSONResponse(await loaded(request))

    async def put(request: Request) -> Response:
        (await loaded(request))[request.path_params["name"]] = request.path_params["value"]
        return Response("put")

    async def remove(request: Request) -> Response:
        del (await loaded(request))[request.path_params["name"]]
        return Response("removed")

    async def clear(request: Request) -> Response:
        (await loaded(request)).clear()
        return Response("cleared")

    async def login(request: Request) -> Response:
        await loaded(request)
        regenerate_session_id(request)
        request.session["user"] = "ann"
        return Response("in")

    async def nothing(request: Request) -> Response:
        return Response("nothing")

    async def cart(request: Request) -> Response:
        await request.state.session.set_cart("book", 2)
        return JSONResponse(await request.state.session.cart())

    return [
        Route("/", get),
        Route("/put/{name}/{value}", put),
        Route("/remove/{name}", remove),
        Route("/clear", clear),
        Route("/login", login),
        Route("/nothing", nothing),
        Route("/cart", cart),
    ]


def client_of(app: Any, **cookies: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=BASE, cookies=cookies)


# -- request.session through webtier's ASGI middleware ----------------------------------------


def webtier_app(tier: Any) -> Starlette:
    app = Starlette(routes=routes(load=False))
    app.add_middleware(sessions.ASGIMiddleware, tier=tier, scope_session=True)
    return app


async def test_request_session_is_set_modified_and_removed_across_requests(tier: Any) -> None:
    async with client_of(webtier_app(tier)) as http:
        nothing = await http.get("/nothing")
        assert "set-cookie" not in nothing.headers  # no session, no cookie
        assert (await http.get("/")).json() == {}
        assert "set-cookie" in (await http.get("/put/theme/dark")).headers
        assert (await http.get("/")).json() == {"theme": "dark"}
        await http.get("/put/theme/light")
        await http.get("/put/lang/en")
        await http.get("/remove/lang")
        assert (await http.get("/")).json() == {"theme": "light"}
        await http.get("/clear")
        assert (await http.get("/")).json() == {}


async def test_request_session_and_the_cart_are_one_session(tier: Any) -> None:
    async with client_of(webtier_app(tier)) as http:
        await http.get("/put/theme/dark")
        token = http.cookies["webtier_session"]
        assert (await http.get("/cart")).json() == {"book": 2}
        assert http.cookies["webtier_session"] == token
        assert (await tier.sessions.data(token)) == {"theme": "dark"}
        assert (await tier.carts.get(token)) == {"book": 2}


async def test_an_outage_answers_503_to_requests_needing_request_session(prefix: str) -> None:
    with RedisServer.start(BINARIES["standalone"]) as server:
        client = webtier.connect_async(server.url, socket_timeout=0.5)
        retry = RetryPolicy(attempts=2, backoff=0.01, backoff_cap=0.05)
        tier = webtier.AsyncWebTier(client, webtier.Config(prefix=prefix, retry=retry))
        async with client_of(webtier_app(tier)) as http:
            await http.get("/put/theme/dark")
            server.kill()
            assert (await http.get("/")).status_code == 503  # loading it needs Redis
            response = await http.get("/put/theme/light")
            assert response.status_code == 503
            assert "session store" in response.text
            async with client_of(webtier_app(tier)) as anonymous:
                assert (await anonymous.get("/nothing")).status_code == 200
                assert (await anonymous.get("/put/a/b")).status_code == 503  # the save
            server.launch()
        await client.aclose()


async def _lost_updates(app: Any, cookie_name: str) -> int:
    """Two clients of one session, each sending PARALLEL requests that set a
    key of its own, at once: how many of the 2 x PARALLEL keys are missing."""
    async with client_of(app) as first:
        await first.get("/put/start/1")
        cookie = {cookie_name: first.cookies[cookie_name]}

    async def requests(name: str) -> None:
        async with client_of(app, **cookie) as http:
            for i in range(PARALLEL):
                assert (await http.get(f"/put/{name}{i}/1")).status_code == 200

    async with anyio.create_task_group() as group:
        group.start_soon(requests, "a")
        group.start_soon(requests, "b")
    async with client_of(app, **cookie) as http:
        kept = (await http.get("/")).json()
    return sum(f"{name}{i}" not in kept for name in "ab" for i in range(PARALLEL))


@pytest.mark.slow
async def test_parallel_requests_changing_different_keys_keep_every_change(
    tier: Any, redis_url: str, prefix: str
) -> None:
    assert await _lost_updates(webtier_app(tier), "webtier_session") == 0
    # The anchor, in the same run: starsessions' Redis store saves the whole session.
    connection = redis.asyncio.Redis.from_url(redis_url)
    anchor = Starlette(routes=routes(load=True))
    anchor.add_middleware(SessionMiddleware, store=RedisStore(connection=connection, prefix=prefix))
    lost = await _lost_updates(anchor, "session")
    print(f"starsessions' RedisStore lost {lost} of {2 * PARALLEL} updates")
    await connection.aclose()


# -- webtier's starsessions store -------------------------------------------------------------


def starsessions_app(store: Store, **options: Any) -> Starlette:
    app = Starlette(routes=routes(load=True))
    app.add_middleware(SessionMiddleware, store=store, **options)
    return app


async def test_store_read_write(tier: Any) -> None:
    """Mirrors starsessions tests/backends/test_redis.py::test_redis_read_write."""
    store = Store(tier)
    sid = await store.write(HEX_ID, b"data", lifetime=60, ttl=60)
    assert await store.read(sid, lifetime=60) == b"data"
    assert await store.write(sid, b"more", lifetime=60, ttl=60) == sid  # kept once stored
    assert await store.read(sid, lifetime=60) == b"more"


async def test_store_write_with_session_only_setup(tier: Any) -> None:
    """Mirrors test_redis.py::test_redis_write_with_session_only_setup (and
    tests/backends/test_memory.py::test_in_memory_expires: readable at once)."""
    store = Store(tier)
    sid = await store.write(HEX_ID, b"data", lifetime=0, ttl=0)
    assert await store.read(sid, lifetime=0) == b"data"


async def test_store_remove(tier: Any) -> None:
    """Mirrors test_redis.py::test_redis_remove and test_memory.py::test_in_memory_remove."""
    store = Store(tier)
    sid = await store.write(HEX_ID, b"data", lifetime=60, ttl=60)
    await store.remove(sid)
    assert await store.read(sid, lifetime=60) == b""
    await store.remove("missing")  # no error on a missing session


async def test_store_empty_session(tier: Any) -> None:
    """Mirrors test_redis.py::test_redis_empty_session."""
    store = Store(tier)
    assert await store.read("unknown_session_id", lifetime=60) == b""
    assert await store.read(HEX_ID, lifetime=60) == b""


async def test_store_requires_a_tier() -> None:
    """Mirrors test_redis.py::test_redis_requires_url_or_connection."""
    with pytest.raises(ConfigError):
        Store(object())  # type: ignore[arg-type]


async def test_store_ttl_is_enforced_by_redis(tier: Any) -> None:
    """Mirrors test_memory.py::test_in_memory_ttl_unit_is_seconds, on Redis's clock."""
    store = Store(tier)
    sid = await store.write(HEX_ID, b"data", lifetime=60, ttl=1)
    assert await store.read(sid, lifetime=60) == b"data"
    await anyio.sleep(1.5)  # only checked after the ttl has surely passed
    assert await store.read(sid, lifetime=60) == b""


async def test_loads_empty_and_not_existing_sessions(tier: Any) -> None:
    """Mirrors starsessions tests/test_middleware.py::test_loads_empty_session
    and ::test_handles_not_existing_session."""
    app = starsessions_app(Store(tier))
    async with client_of(app) as http:
        assert (await http.get("/")).json() == {}
    async with client_of(app, session="session_id") as http:
        assert (await http.get("/")).json() == {}


async def test_loads_existing_session_and_sends_cookies(tier: Any) -> None:
    """Mirrors test_middleware.py::test_loads_existing_session,
    ::test_send_cookie_if_session_created and ::test_send_cookie_if_session_updated."""
    store = Store(tier)
    sid = await store.write(HEX_ID, b'{"key": "value"}', 60, 60)
    async with client_of(starsessions_app(store, lifetime=60), session=sid) as http:
        assert (await http.get("/")).json() == {"key": "value"}
        response = await http.get("/put/key2/value2")
        assert "session=" in response.headers["set-cookie"]
        assert (await http.get("/")).json() == {"key": "value", "key2": "value2"}
    async with client_of(starsessions_app(store)) as http:
        assert "session=" in (await http.get("/put/key/value")).headers["set-cookie"]


async def test_a_destroyed_session_is_cleared_from_the_store(tier: Any) -> None:
    """Mirrors test_middleware.py::test_send_cookie_if_session_destroyed,
    ::test_will_clear_storage_if_session_destroyed and
    ::test_will_not_send_cookie_if_initially_empty_session_destroyed."""
    store = Store(tier)
    sid = await store.write(HEX_ID, b'{"key2": "value2"}', 60, 60)
    async with client_of(starsessions_app(store), session=sid) as http:
        response = await http.get("/clear")
        assert "01 Jan 1970 00:00:00 GMT" in response.headers["set-cookie"]
    assert await store.read(sid, lifetime=60) == b""
    async with client_of(starsessions_app(store), session="session_id") as http:
        assert "set-cookie" not in (await http.get("/clear")).headers


async def test_session_only_cookies(tier: Any) -> None:
    """Mirrors test_middleware.py::test_session_only_cookies."""
    async with client_of(starsessions_app(Store(tier), lifetime=0)) as http:
        response = await http.get("/put/key/value")
        assert "max-age" not in response.headers["set-cookie"].lower()
        assert (await http.get("/")).json() == {"key": "value"}


async def test_an_offered_unknown_id_never_becomes_a_session(tier: Any) -> None:
    """starsessions writes a new session under the id the cookie offered;
    webtier's store answers with an id of its own (no session fixation)."""
    store = Store(tier)
    async with client_of(starsessions_app(store), session=HEX_ID) as http:
        response = await http.get("/put/key/value")
        assert response.cookies["session"] != HEX_ID
    assert await store.read(HEX_ID, lifetime=60) == b""


async def test_a_regenerated_id_on_login_keeps_the_data(tier: Any) -> None:
    """starsessions' regenerate_session_id at login: the data under a new id.
    (starsessions 2.2.1 leaves the old id's data in the store; its main
    branch removes it through the store's ``remove``, tested above.)"""
    store = Store(tier)
    async with client_of(starsessions_app(store, lifetime=60)) as http:
        await http.get("/put/cart/1")
        before = http.cookies["session"]
        await http.get("/login")
        after = http.cookies["session"]
        assert after != before
        assert (await http.get("/")).json() == {"cart": "1", "user": "ann"}
