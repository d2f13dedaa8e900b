"""webtier's one ASGI layer (``webtier.web.ASGIMiddleware``): sessions, the
page cache, access time, hits and item views in a single middleware, a
cached page answered before the session, the router or the app run, in one
Redis round trip, and everything counted in process reaching Redis at
shutdown."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

import webtier
from tests.helpers.web import asgi_lifespan, set_cookies
from tests.helpers.wire import Wire
from webtier.config import ACCESS_TIME
from webtier.pagecache import CacheRoute, PageRules
from webtier.web import ASGIMiddleware
from webtier.web.sessions import SessionOptions

pytestmark = pytest.mark.anyio

KEY = b"k" * 32
PAGE = b"<p>an item</p>"
RULES = PageRules(routes=(CacheRoute("/item/*", item_pages=True, item_in_path=True),))
ITEM_ROUTE = "/item/{item_id}"


class Shop:
    """A Starlette app behind the layer with every part, counting the calls
    of its handlers. ``in_front``: the layer wraps the Starlette app as plain
    ASGI (as webtier's demo shop has it) instead of being its middleware."""

    def __init__(self, tier: webtier.AsyncWebTier, in_front: bool = False) -> None:
        self.tier, self.renders = tier, 0

        async def item(request: Request) -> Response:
            self.renders += 1
            return Response(PAGE, media_type="text/html")

        async def cart(request: Request) -> Response:
            await request.state.session.set_cart("book", 1)
            return Response("added")

        layer = Middleware(
            ASGIMiddleware,
            tier=tier,
            sessions=SessionOptions(signing_keys=[KEY]),
            pages=RULES,
            item_views=True,
            timing=True,
            hits="hits:",
        )
        routes = [Route(ITEM_ROUTE, item), Route("/cart", cart, methods=["POST"])]
        self.app: Any
        if in_front:
            self.app = layer.cls(Starlette(routes=routes), *layer.args, **layer.kwargs)
        else:
            self.app = Starlette(routes=routes, middleware=[layer])

    async def get(self, path: str, **headers: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop.test") as http:
            return await http.get(path, headers=headers)

    async def post(self, path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop.test") as http:
            return await http.post(path)


@pytest.fixture
async def atier(redis_url: str, config: webtier.Config) -> AsyncIterator[webtier.AsyncWebTier]:
    client = webtier.connect_async(redis_url)
    yield webtier.AsyncWebTier(client, config)
    await client.aclose()


async def hits(tier: webtier.AsyncWebTier, name: str) -> int:
    return sum(count for _, count in await tier.counters.get(name, 86400))


async def test_a_cached_page_is_one_round_trip_and_nothing_else_runs(
    atier: webtier.AsyncWebTier, monkeypatch: pytest.MonkeyPatch
) -> None:
    wire = Wire(monkeypatch)
    shop = Shop(atier)
    await atier.ranking.record_view("1")  # in the top items: its page may be cached
    # The shop's views are counted in process while an aggregator is open.
    views = atier.ranking.aggregator(flush_interval=60)
    async with asgi_lifespan(shop.app):
        first = await shop.get("/item/1")
        assert first.headers["x-cache"] == "MISS"
        for _ in range(3):
            with wire.counting() as trips:
                page = await shop.get("/item/1")
            assert (page.status_code, page.content, page.headers["x-cache"]) == (200, PAGE, "HIT")
            assert trips() == 1  # the page (and its item's rank): one pipeline
        assert shop.renders == 1
    await views.aclose()


@pytest.mark.parametrize("in_front", [False, True], ids=["starlette-middleware", "in-front"])
async def test_every_part_counts_cached_and_rendered_pages_alike(
    atier: webtier.AsyncWebTier, in_front: bool
) -> None:
    # In front, a cached page never reaches Starlette at all: its route's
    # template is matched on the wrapped app's router, not counted unmatched.
    shop = Shop(atier, in_front)
    await atier.ranking.record_view("1")
    async with asgi_lifespan(shop.app):
        pages = [await shop.get("/item/1") for _ in range(5)]
        statuses = [page.headers["x-cache"] for page in pages]
        # A browser revalidating its copy viewed the item too.
        revalidated = await shop.get("/item/1", **{"if-none-match": pages[-1].headers["etag"]})
        assert revalidated.status_code == 304
        added = await shop.post("/cart")
        cookie = set_cookies(added.headers)[0].partition(";")[0]
        # A visitor with a session: the page cache leaves them to the app,
        # whose session's touch would count their view (this app's does not).
        with_session = await shop.get("/item/1", cookie=cookie)
        assert with_session.status_code == 200
        assert "x-cache" not in with_session.headers
    # The lifespan's shutdown flushed what was counted in process.
    assert statuses == ["MISS", "HIT", "HIT", "HIT", "HIT"]
    assert await hits(atier, f"hits:{ITEM_ROUTE}") == 7
    assert await hits(atier, "hits:/cart") == 1
    assert await hits(atier, "hits:all") == 8
    assert await hits(atier, "pagecache:hit") == 5
    timed = await atier.stats.get_many([ITEM_ROUTE, "/cart"], ACCESS_TIME)
    assert [summary.count for summary in timed.values()] == [7, 1]
    # One view recorded by the test, six anonymous ones by the layer.
    assert dict(await atier.ranking.top(10))["1"] == 7


async def test_the_app_sees_the_servers_scope_not_a_copy(atier: webtier.AsyncWebTier) -> None:
    seen: list[Scope] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    layer = ASGIMiddleware(
        app, atier, sessions=SessionOptions(signing_keys=[KEY]), pages=RULES, timing=True
    )
    scope: dict[str, Any] = {
        "type": "http",
        "method": "GET",
        "path": "/about",
        "query_string": b"",
        "headers": [(b"host", b"shop.test")],
    }
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        sent.append(message)

    await layer(scope, receive, send)
    await layer.aclose()
    assert seen == [scope]
    assert seen[0] is scope
    assert sent[0]["status"] == 204


async def test_item_views_need_the_page_rules(atier: webtier.AsyncWebTier) -> None:
    with pytest.raises(ValueError, match="item_views needs pages"):
        ASGIMiddleware(Starlette(), atier, item_views=True)
