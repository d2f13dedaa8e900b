"""Holes in cached pages, through webtier's ASGI layer: one stored copy of
an item page for every visitor, each visitor's name, cart and recently
viewed filled in from their session, read in the page's own round trip."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import httpx
import pytest
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

import webtier
from tests.helpers.web import asgi_lifespan, cookie_value, set_cookies
from tests.helpers.wire import Wire
from webtier.pagecache import CacheRoute, PageRules
from webtier.pagecache.copies import decode
from webtier.pagecache.holes import Holes, Visit
from webtier.web import ASGIMiddleware
from webtier.web.sessions import SessionOptions

pytestmark = pytest.mark.anyio

KEY = b"k" * 32
COOKIE = "webtier_session"
RULES = PageRules(
    routes=(
        CacheRoute("/item/*", item_pages=True, item_in_path=True, holes=True),
        CacheRoute("/peek/*", item_pages=True, item_in_path=True, holes=True),
        # A message waiting in the session is shown (and forgotten) by a render.
        CacheRoute("/news", ttl=60, holes=True, render_for=lambda visit: "notice" in visit.data),
    )
)


def greeting(visit: Visit) -> object:
    if visit.user is None:
        return Markup('<a href="/login">Log in</a>')
    return f"Hello, {visit.user}"  # text: escaped


HOLES = Holes(
    {
        "greeting": greeting,
        "cart": lambda visit: visit.cart_units,
        "viewed": lambda visit: ",".join(visit.viewed),
    }
)


def page(item: str, extra: str = "") -> bytes:
    mark = HOLES.mark
    return (
        f"<header>{mark('greeting')} · cart {mark('cart')}</header>"
        f"<h1>Item {item}</h1>{'lorem ipsum ' * 200}{extra}"
        f"<aside>seen: {mark('viewed')}</aside>"
    ).encode()


class Shop:
    """A Starlette app behind the layer, counting its renders."""

    def __init__(self, tier: webtier.AsyncWebTier) -> None:
        self.renders = 0

        async def item(request: Request) -> Response:
            self.renders += 1
            return HTMLResponse(page(request.path_params["item"]))

        async def peek(request: Request) -> Response:
            # Reads the session outside any hole: its page is one visitor's.
            self.renders += 1
            user = await request.state.session.user()
            return HTMLResponse(page(request.path_params["item"], f"<p>{user}</p>"))

        async def login(request: Request) -> Response:
            session = request.state.session
            await session.login(request.path_params["user"])
            await session.set_cart("book", 2)
            return Response("in")

        async def news(request: Request) -> Response:
            # The visitor's notice, taken: only a visitor with a session asks.
            self.renders += 1
            notice = ""
            if COOKIE in request.cookies:
                notice = await request.state.session.get("notice", "")
                if notice:
                    await request.state.session.discard("notice")
            return HTMLResponse(page("news", f"<p>{notice}</p>"))

        async def notice(request: Request) -> Response:
            await request.state.session.update({"notice": "your order shipped"})
            return Response("noted")

        self.app = Starlette(
            routes=[
                Route("/item/{item}", item),
                Route("/peek/{item}", peek),
                Route("/login/{user}", login, methods=["POST"]),
                Route("/news", news),
                Route("/notice", notice, methods=["POST"]),
            ],
            middleware=[
                Middleware(
                    ASGIMiddleware,
                    tier=tier,
                    sessions=SessionOptions(signing_keys=[KEY]),
                    pages=RULES,
                    holes=HOLES,
                    item_views=True,
                )
            ],
        )
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://shop.test"
        )

    async def login(self, user: str) -> str:
        response = await self.http.post(f"/login/{user}")
        (cookie,) = set_cookies(response.headers)
        return cookie_value(cookie)

    async def get(self, path: str, token: str | None = None, **headers: str) -> httpx.Response:
        if token is not None:
            headers["cookie"] = f"{COOKIE}={token}"
        self.http.cookies.clear()
        return await self.http.get(path, headers=headers)


@pytest.fixture
async def atier(redis_url: str, config: webtier.Config) -> AsyncIterator[webtier.AsyncWebTier]:
    client = webtier.connect_async(redis_url)
    tier = webtier.AsyncWebTier(client, config)
    await tier.ranking.record_view("1")  # in the top items: its page may be cached
    await tier.ranking.record_view("2")
    yield tier
    await client.aclose()


@pytest.fixture
async def shop(atier: webtier.AsyncWebTier) -> AsyncIterator[Shop]:
    made = Shop(atier)
    async with asgi_lifespan(made.app):
        yield made
    await made.http.aclose()


def stored_body(redis_url: str, config: webtier.Config) -> bytes:
    """The plain body of the one page the test's tier stores."""
    client = webtier.connect(redis_url)
    try:
        copies = []
        for key in client.scan_iter(match=f"*{config.prefix}*", count=1000):
            value = client.get(key) if client.type(key) == b"string" else None
            if isinstance(value, bytes) and (found := decode(value)) is not None:
                copies.append(found)
    finally:
        webtier.disconnect(client)
    (stored,) = copies
    return stored.plain_body()


@pytest.mark.matrix  # the page and the session in one step: on Cluster, two nodes
async def test_each_visitor_gets_their_own_holes_from_one_stored_page(
    shop: Shop, redis_url: str, config: webtier.Config
) -> None:
    ann, bob = await shop.login("ann"), await shop.login("bob<script>")
    first = await shop.get("/item/1", ann)
    assert first.headers["x-cache"] == "MISS"
    assert "Hello, ann · cart 2" in first.text
    for token, name in ((bob, "bob&lt;script&gt;"), (ann, "ann")):
        answer = await shop.get("/item/1", token)
        assert answer.headers["x-cache"] == "HIT"
        assert f"Hello, {name} · cart 2" in answer.text
        assert "bob<script>" not in answer.text  # a fill's text is escaped
    anonymous = await shop.get("/item/1")
    assert anonymous.headers["x-cache"] == "HIT"
    assert '<a href="/login">Log in</a> · cart 0' in anonymous.text
    assert shop.renders == 1
    # What is stored holds no visitor's byte, and no marker.
    stored = stored_body(redis_url, config)
    assert b"ann" not in stored
    assert b"bob" not in stored
    assert b"webtier-hole" not in stored
    assert b"Log in" not in stored


async def test_a_stored_page_is_the_same_whoever_rendered_it(
    shop: Shop, atier: webtier.AsyncWebTier, redis_url: str, config: webtier.Config
) -> None:
    ann, bob = await shop.login("ann"), await shop.login("bob")
    await shop.get("/item/1", ann)
    by_ann = stored_body(redis_url, config)
    await atier.pagecache.invalidate_item("1")
    await shop.get("/item/1", bob)
    assert stored_body(redis_url, config) == by_ann
    await atier.pagecache.invalidate_item("1")
    await shop.get("/item/1")
    assert stored_body(redis_url, config) == by_ann


async def test_a_filled_hit_is_one_round_trip_and_counts_the_view(
    shop: Shop, atier: webtier.AsyncWebTier, monkeypatch: pytest.MonkeyPatch
) -> None:
    wire = Wire(monkeypatch)
    ann = await shop.login("ann")
    await shop.get("/item/2", ann)
    answer = await shop.get("/item/1", ann)
    assert answer.headers["x-cache"] == "MISS"  # rendered and stored
    with wire.counting() as trips:
        answer = await shop.get("/item/1", ann)
    assert answer.headers["x-cache"] == "HIT"
    assert trips() == 1  # the page, its rank, the view and the session: one pipeline
    # The view of the hit is in the session, newest first, before the fill.
    assert "seen: 1,1,2" not in answer.text  # one entry per item
    assert "seen: 1,2" in answer.text
    assert set_cookies(answer.headers) == []  # a hit sets no cookie


@pytest.mark.matrix  # the page and the session in one step: on Cluster, two nodes
async def test_recently_viewed_and_ranking_count_each_cached_view(
    shop: Shop, atier: webtier.AsyncWebTier
) -> None:
    ann = await shop.login("ann")
    await shop.get("/item/2", ann)
    top_before = dict(await atier.ranking.top(10))
    for _ in range(3):
        answer = await shop.get("/item/2", ann)
        assert answer.headers["x-cache"] == "HIT"
    top_after = dict(await atier.ranking.top(10))
    assert top_after["2"] - top_before["2"] == 3
    token = ann.split(".")[0]  # the cookie is the token and its signature
    assert await atier.sessions.recently_viewed(token) == ["2"]


async def test_a_render_that_reads_the_session_is_answered_never_stored(
    shop: Shop, atier: webtier.AsyncWebTier
) -> None:
    ann, bob = await shop.login("ann"), await shop.login("bob")
    first = await shop.get("/peek/1", ann)
    assert "<p>ann</p>" in first.text
    assert "Hello, ann" in first.text
    second = await shop.get("/peek/1", bob)
    assert second.headers["x-cache"] == "MISS"
    assert "<p>bob</p>" in second.text
    assert "ann" not in second.text
    assert shop.renders == 2


async def test_each_visitor_has_their_own_etag_and_gzip(shop: Shop) -> None:
    ann, bob = await shop.login("ann"), await shop.login("bob")
    await shop.get("/item/1")
    by_ann = await shop.get("/item/1", ann, **{"accept-encoding": "gzip"})
    by_bob = await shop.get("/item/1", bob)
    assert by_ann.headers["content-encoding"] == "gzip"
    assert "Hello, ann" in by_ann.text  # httpx took the gzip apart
    assert by_ann.headers["etag"] != by_bob.headers["etag"]
    again = await shop.get("/item/1", ann, **{"if-none-match": by_ann.headers["etag"]})
    assert again.status_code == 304
    other = await shop.get("/item/1", bob, **{"if-none-match": by_ann.headers["etag"]})
    assert other.status_code == 200
    assert "Hello, bob" in other.text


async def test_gzip_of_a_filled_page_is_one_valid_member(shop: Shop) -> None:
    ann = await shop.login("ann")
    await shop.get("/item/1")
    plain = await shop.get("/item/1", ann)
    # httpx's client takes gzip apart: the transport's response holds the wire bytes.
    transport = httpx.ASGITransport(app=shop.app)
    request = httpx.Request(
        "GET",
        "http://shop.test/item/1",
        headers={"cookie": f"{COOKIE}={ann}", "accept-encoding": "gzip"},
    )
    response = await transport.handle_async_request(request)
    packed = b"".join([chunk async for chunk in response.stream])  # type: ignore[union-attr]
    assert response.headers["content-encoding"] == "gzip"
    assert int(response.headers["content-length"]) == len(packed)
    assert gzip.decompress(packed).decode() == plain.text


async def test_a_page_the_cache_may_not_answer_is_filled_all_the_same(
    shop: Shop, atier: webtier.AsyncWebTier
) -> None:
    # A reload asking for a fresh page: rendered, never stored, and filled;
    # the visitor's view counted as on a cached answer.
    ann = await shop.login("ann")
    for _ in range(2):
        answer = await shop.get("/item/2", ann, **{"cache-control": "no-cache"})
        assert "x-cache" not in answer.headers  # left to the app
        assert "Hello, ann · cart 2" in answer.text
        assert "webtier-hole" not in answer.text
    assert shop.renders == 2
    assert await atier.sessions.recently_viewed(ann.split(".")[0]) == ["2"]
    anonymous = await shop.get("/item/2", **{"cache-control": "no-cache"})
    assert "Log in" in anonymous.text


async def test_a_visitor_whose_session_ended_is_filled_as_anonymous(
    shop: Shop, atier: webtier.AsyncWebTier
) -> None:
    ann = await shop.login("ann")
    await shop.get("/item/1")
    assert await atier.sessions.revoke_all("ann") == 1
    answer = await shop.get("/item/1", ann)
    assert answer.headers["x-cache"] == "HIT"
    assert '<a href="/login">Log in</a> · cart 0' in answer.text


async def test_a_middleware_that_fills_no_holes_leaves_visitors_with_a_session_to_the_app(
    atier: webtier.AsyncWebTier,
) -> None:
    renders = []

    async def item(request: Request) -> Response:
        renders.append(request.headers.get("cookie"))
        return HTMLResponse(b"<p>the same for everyone</p>")

    app = Starlette(
        routes=[Route("/item/{item}", item)],
        middleware=[Middleware(ASGIMiddleware, tier=atier, pages=RULES)],  # no holes
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://shop.test"
    ) as http:
        await http.get("/item/1")
        assert (await http.get("/item/1")).headers["x-cache"] == "HIT"
        with_session = await http.get("/item/1", headers={"cookie": f"{COOKIE}=x"})
    assert "x-cache" not in with_session.headers
    assert len(renders) == 2


async def test_a_visitor_with_a_notice_gets_a_render_that_is_never_stored(
    shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    wire = Wire(monkeypatch)
    assert (await shop.get("/news")).headers["x-cache"] == "MISS"  # stored for everyone
    ann = await shop.login("ann")
    shop.http.cookies.clear()
    await shop.http.post("/notice", headers={"cookie": f"{COOKIE}={ann}"})
    with wire.counting() as trips:
        noticed = await shop.get("/news", ann)
    # Rendered for her, filled, her notice shown once: the page and her
    # session in one round trip (her handler reads the session from it),
    # then the handler's write taking the notice.
    assert noticed.headers["x-cache"] == "MISS"
    assert "your order shipped" in noticed.text
    assert "Hello, ann" in noticed.text
    assert trips() == 2
    assert shop.renders == 2
    again = await shop.get("/news", ann)
    assert again.headers["x-cache"] == "HIT"  # the notice is gone: the shared page, filled
    assert "Hello, ann" in again.text
    assert "your order shipped" not in again.text
    anonymous = await shop.get("/news")
    assert anonymous.headers["x-cache"] == "HIT"
    assert "your order shipped" not in anonymous.text
    assert "ann" not in anonymous.text
    assert shop.renders == 2


async def test_a_render_of_one_visitors_page_leaves_the_page_to_the_next_render(
    shop: Shop,
) -> None:
    ann = await shop.login("ann")
    theirs = await shop.get("/news", ann)  # her handler read her session: hers alone
    assert theirs.headers["x-cache"] == "MISS"
    # No pass note left for the page: the next render, anonymous, is stored.
    assert (await shop.get("/news")).headers["x-cache"] == "MISS"
    shared = await shop.get("/news")
    assert shared.headers["x-cache"] == "HIT"
    assert "ann" not in shared.text
    assert shop.renders == 2
