"""Page cache ASGI middleware on a real Starlette app (through httpx), on
every Redis target: admission, keys, privacy, compression, ETags,
invalidation and the stampede."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import webtier
from webtier.config import Config, PageCacheSettings
from webtier.pagecache import CacheRoute, PageRules
from webtier.web import pagecache

pytestmark = pytest.mark.anyio

BIG = ("<p>the same paragraph, many times over</p>\n" * 200).encode()


class Shop:
    """A Starlette app counting its renders."""

    def __init__(self) -> None:
        self.renders: dict[str, int] = {}
        self.gate: asyncio.Event | None = None

    def count(self, request: Request) -> None:
        path = request.url.path
        self.renders[path] = self.renders.get(path, 0) + 1

    async def item(self, request: Request) -> Response:
        self.count(request)
        if self.gate is not None:
            await self.gate.wait()
        return PlainTextResponse(f"item {request.query_params.get('item')} {request.url.query}")

    async def big(self, request: Request) -> Response:
        self.count(request)
        return Response(BIG, media_type="text/html")

    async def me(self, request: Request) -> Response:
        self.count(request)
        user = request.cookies.get("webtier_session", "nobody")
        return PlainTextResponse(f"hello {user}")

    async def greet(self, request: Request) -> Response:
        self.count(request)
        return PlainTextResponse(f"hello in {request.headers.get('accept-language', '?')}")

    async def cookie(self, request: Request) -> Response:
        self.count(request)
        if self.gate is not None:
            await self.gate.wait()
        response = PlainTextResponse("has a cookie")
        response.set_cookie("csrf", f"token-{self.renders['/cookie']}")
        return response

    async def private(self, request: Request) -> Response:
        self.count(request)
        return PlainTextResponse("mine", headers={"cache-control": "private"})

    async def stream(self, request: Request) -> Response:
        self.count(request)

        async def chunks() -> AsyncIterator[bytes]:
            for n in range(3):
                yield f"chunk {n} ".encode()

        return StreamingResponse(chunks())

    async def missing(self, request: Request) -> Response:
        self.count(request)
        return PlainTextResponse("no such page", status_code=404)

    def app(self, tier: webtier.AsyncWebTier, rules: PageRules) -> Starlette:
        app = Starlette(
            routes=[
                Route("/item", self.item),
                Route("/big", self.big),
                Route("/me", self.me),
                Route("/greet", self.greet),
                Route("/cookie", self.cookie),
                Route("/private", self.private),
                Route("/stream", self.stream),
                Route("/missing", self.missing),
            ]
        )
        app.add_middleware(pagecache.ASGIMiddleware, tier=tier, rules=rules)
        return app


RULES = PageRules(
    routes=(
        CacheRoute("/item", item_pages=True),
        CacheRoute("/big"),
        CacheRoute("/me"),
        CacheRoute("/greet", vary=("Accept-Language",)),
        CacheRoute("/cookie"),
        CacheRoute("/private"),
        CacheRoute("/stream"),
        CacheRoute("/missing"),
    )
)


@pytest.fixture
def page_config(prefix: str) -> Config:
    # No time limit and a long lock wait: the stampede below (200 requests on
    # a busy machine) tests that one render serves all, not how fast Redis
    # answers; a lookup past 1 s would be served uncached, a render more.
    settings = PageCacheSettings(top=2, counters=False, time_limit=None, lock_wait=60)
    return Config(prefix=prefix, pagecache=settings)


@pytest.fixture
async def atier(async_client: Any, page_config: Config) -> webtier.AsyncWebTier:
    return webtier.AsyncWebTier(async_client, page_config)


@pytest.fixture
def shop() -> Shop:
    return Shop()


@pytest.fixture
async def http(atier: webtier.AsyncWebTier, shop: Shop) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=shop.app(atier, RULES))
    async with httpx.AsyncClient(transport=transport, base_url="http://shop.test") as client:
        yield client


async def popular(tier: webtier.AsyncWebTier, *items: str) -> None:
    for item in items:
        await tier.ranking.record_view(item)


async def test_popular_item_page_is_rendered_once_then_hit(
    http: httpx.AsyncClient, atier: webtier.AsyncWebTier, shop: Shop
) -> None:
    await popular(atier, "42")
    first = await http.get("/item?item=42")
    second = await http.get("/item?item=42")
    assert first.status_code == second.status_code == 200
    assert first.headers["x-cache"] == "MISS"
    assert second.headers["x-cache"] == "HIT"
    assert first.text == second.text == "item 42 item=42"
    assert shop.renders["/item"] == 1
    assert second.headers["etag"] == first.headers["etag"]


async def test_unpopular_and_dynamic_item_pages_are_not_cached(
    http: httpx.AsyncClient, atier: webtier.AsyncWebTier, shop: Shop
) -> None:
    await popular(atier, "1", "2")
    await popular(atier, "1", "2")
    await popular(atier, "3")  # ranks third: top is 2
    for _ in range(2):
        assert (await http.get("/item?item=3")).headers["x-cache"] == "MISS"
        assert "x-cache" not in (await http.get("/item?item=1&_=123")).headers
    assert shop.renders["/item"] == 4


async def test_query_is_normalized_and_tracking_params_ignored(
    http: httpx.AsyncClient, atier: webtier.AsyncWebTier, shop: Shop
) -> None:
    await popular(atier, "7")
    assert (await http.get("/item?item=7&color=red")).headers["x-cache"] == "MISS"
    again = await http.get("/item?color=red&utm_source=mail&item=7&fbclid=abc")
    assert again.headers["x-cache"] == "HIT"
    assert (await http.get("/item?item=7&color=blue")).headers["x-cache"] == "MISS"
    assert shop.renders["/item"] == 2


async def test_vary_headers_split_the_key_and_other_headers_do_not(
    http: httpx.AsyncClient, shop: Shop
) -> None:
    fr = await http.get("/greet", headers={"accept-language": "fr"})
    de = await http.get("/greet", headers={"accept-language": "de"})
    fr2 = await http.get(
        "/greet", headers={"accept-language": "fr", "cookie": "csrftoken=x; _ga=1"}
    )
    assert (fr.text, de.text, fr2.text) == ("hello in fr", "hello in de", "hello in fr")
    assert [r.headers["x-cache"] for r in (fr, de, fr2)] == ["MISS", "MISS", "HIT"]


async def test_one_users_page_is_never_served_to_another(
    http: httpx.AsyncClient, shop: Shop
) -> None:
    anonymous = await http.get("/me")  # cached: the same for everyone without a session
    alice = await http.get("/me", headers={"cookie": "webtier_session=alice"})
    bob = await http.get("/me", headers={"cookie": "theme=dark; sessionid=bob"})
    carol = await http.get("/me", headers={"authorization": "Bearer carol"})
    alice2 = await http.get("/me", headers={"cookie": "webtier_session=alice2"})
    assert anonymous.text == "hello nobody"
    assert alice.text == "hello alice"
    assert alice2.text == "hello alice2"
    assert bob.text == "hello nobody"  # the app reads webtier_session only...
    assert "x-cache" not in bob.headers  # ...yet the request bypassed the cache
    for response in (alice, carol, alice2):
        assert "x-cache" not in response.headers
    assert (await http.get("/me")).text == "hello nobody"


async def test_responses_that_must_not_be_stored_are_not(
    http: httpx.AsyncClient, shop: Shop
) -> None:
    for path in ("/cookie", "/private", "/stream", "/missing"):
        first = await http.get(path)
        second = await http.get(path)
        assert first.headers["x-cache"] == second.headers["x-cache"] == "MISS", path
        assert first.content == second.content
        assert shop.renders[path] == 2, path
    assert (await http.get("/stream")).text == "chunk 0 chunk 1 chunk 2 "


async def test_stored_compressed_served_either_way(
    http: httpx.AsyncClient, atier: webtier.AsyncWebTier, async_client: Any, prefix: str
) -> None:
    await http.get("/big")
    zipped = await http.get("/big", headers={"accept-encoding": "gzip"})
    plain = await http.get("/big", headers={"accept-encoding": "identity"})
    assert zipped.headers["x-cache"] == plain.headers["x-cache"] == "HIT"
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.content == BIG  # httpx decodes it
    assert "content-encoding" not in plain.headers
    assert plain.content == BIG
    assert "Accept-Encoding" in plain.headers["vary"]
    assert int(zipped.headers["content-length"]) < len(BIG) // 5


async def test_etag_and_not_modified(http: httpx.AsyncClient) -> None:
    first = await http.get("/big")
    etag = first.headers["etag"]
    again = await http.get("/big", headers={"if-none-match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == etag
    assert again.headers["x-cache"] == "HIT"
    other = await http.get("/big", headers={"if-none-match": '"something-else"'})
    assert other.status_code == 200


async def test_invalidate_page_item_and_everything(
    http: httpx.AsyncClient, atier: webtier.AsyncWebTier, shop: Shop
) -> None:
    await popular(atier, "5", "6")
    urls = ["/item?item=5", "/item?item=5&page=2", "/item?item=6", "/big"]
    for url in urls:
        await http.get(url)
    assert [(await http.get(u)).headers["x-cache"] for u in urls] == ["HIT"] * 4
    assert await atier.pagecache.invalidate_item("5") == 2
    assert [(await http.get(u)).headers["x-cache"] for u in urls] == ["MISS", "MISS", "HIT", "HIT"]
    await atier.pagecache.invalidate("http://shop.test/big", rules=RULES)
    assert (await http.get("/big")).headers["x-cache"] == "MISS"
    assert await atier.pagecache.invalidate_all() == 4
    assert [(await http.get(u)).headers["x-cache"] for u in urls] == ["MISS"] * 4


async def test_stampede_renders_once(atier: webtier.AsyncWebTier, shop: Shop) -> None:
    await popular(atier, "99")
    shop.gate = asyncio.Event()
    transport = httpx.ASGITransport(app=shop.app(atier, RULES))
    async with httpx.AsyncClient(transport=transport, base_url="http://shop.test") as client:
        requests = [asyncio.create_task(client.get("/item?item=99")) for _ in range(200)]
        while shop.renders.get("/item", 0) == 0:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # let the others reach the lock (they wait for it)
        shop.gate.set()
        responses = await asyncio.gather(*requests)
    assert shop.renders["/item"] == 1
    assert {r.text for r in responses} == {"item 99 item=99"}
    outcomes = [r.headers["x-cache"] for r in responses]
    assert outcomes.count("MISS") == 1


async def test_concurrent_requests_never_share_a_response_that_sets_a_cookie(
    atier: webtier.AsyncWebTier, shop: Shop
) -> None:
    shop.gate = asyncio.Event()
    transport = httpx.ASGITransport(app=shop.app(atier, RULES))
    async with httpx.AsyncClient(transport=transport, base_url="http://shop.test") as client:
        requests = [asyncio.create_task(client.get("/cookie")) for _ in range(5)]
        while shop.renders.get("/cookie", 0) == 0:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the others are waiting for the first
        shop.gate.set()
        responses = await asyncio.gather(*requests)
    cookies = [r.headers["set-cookie"].split(";")[0] for r in responses]
    assert len(set(cookies)) == 5  # each its own render, its own cookie
    assert shop.renders["/cookie"] == 5


async def test_stale_while_revalidate(async_client: Any, prefix: str, shop: Shop) -> None:
    config = Config(
        prefix=prefix, pagecache=PageCacheSettings(ttl=0.2, jitter=0, grace=60, counters=False)
    )
    tier = webtier.AsyncWebTier(async_client, config)
    transport = httpx.ASGITransport(app=shop.app(tier, RULES))
    async with httpx.AsyncClient(transport=transport, base_url="http://shop.test") as client:
        assert (await client.get("/big")).headers["x-cache"] == "MISS"
        await asyncio.sleep(0.3)
        # The first request after expiry renders it anew; meanwhile others get it stale.
        shop_gate = asyncio.Event()
        original = shop.big

        async def slow_big(request: Request) -> Response:
            await shop_gate.wait()
            return await original(request)

        shop.big = slow_big  # type: ignore[method-assign]
        transport2 = httpx.ASGITransport(app=shop.app(tier, RULES))
        async with httpx.AsyncClient(transport=transport2, base_url="http://shop.test") as c2:
            renewing = asyncio.create_task(c2.get("/big"))
            await asyncio.sleep(0.2)
            stale = await c2.get("/big")
            assert stale.headers["x-cache"] == "STALE"
            assert stale.content == BIG
            shop_gate.set()
            assert (await renewing).headers["x-cache"] == "MISS"
            assert (await c2.get("/big")).headers["x-cache"] == "HIT"


def test_settings_are_checked() -> None:
    with pytest.raises(webtier.ConfigError):
        PageCacheSettings(ttl=0)
    with pytest.raises(webtier.ConfigError):
        PageCacheSettings(jitter=0.9)
    with pytest.raises(webtier.ConfigError):
        CacheRoute("no-slash")
    assert dataclasses.replace(PageCacheSettings(), top=5).top == 5
