"""The page cache middleware behind real HTTP servers: a Flask app under
Werkzeug's threaded WSGI server, and a Starlette app under uvicorn, on every
Redis target."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import flask
import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from werkzeug.serving import make_server

import webtier
from webtier.config import Config, PageCacheSettings
from webtier.pagecache import CacheRoute, PageRules
from webtier.testing import free_port
from webtier.web import pagecache

BIG = ("<li>one more line of a long listing</li>\n" * 300).encode()
RULES = PageRules(
    routes=(
        CacheRoute("/item", item_pages=True),
        CacheRoute("/big"),
        CacheRoute("/me"),
        CacheRoute("/stream"),
    )
)


@pytest.fixture
def page_config(prefix: str) -> Config:
    return Config(prefix=prefix, pagecache=PageCacheSettings(top=10))


# -- Flask under a real WSGI server ---------------------------------------------------------


class FlaskShop:
    def __init__(self, tier: webtier.WebTier) -> None:
        self.renders = 0
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()
        app = flask.Flask("shop")

        @app.get("/item")
        def item() -> str:
            self.count()
            assert self.gate.wait(60)
            return f"item {flask.request.args['item']}"

        @app.get("/big")
        def big() -> flask.Response:
            self.count()
            return flask.Response(BIG, mimetype="text/html")

        @app.get("/me")
        def me() -> str:
            self.count()
            return f"hello {flask.request.cookies.get('session', 'nobody')}"

        @app.get("/stream")
        def stream() -> flask.Response:
            self.count()
            return flask.Response((f"chunk {n} " for n in range(3)), mimetype="text/plain")

        self.middleware = pagecache.WSGIMiddleware(app.wsgi_app, tier, RULES)
        app.wsgi_app = self.middleware  # type: ignore[method-assign]
        self.app = app

    def count(self) -> None:
        with self.lock:
            self.renders += 1


@pytest.fixture
def flask_shop(sync_client: Any, page_config: Config) -> Iterator[tuple[FlaskShop, str]]:
    tier = webtier.WebTier(sync_client, page_config)
    shop = FlaskShop(tier)
    server = make_server("127.0.0.1", 0, shop.app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield shop, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    shop.middleware.close()


def test_flask_pages_are_cached_compressed_and_private_ones_never(
    flask_shop: tuple[FlaskShop, str], sync_client: Any, page_config: Config
) -> None:
    shop, base = flask_shop
    webtier.WebTier(sync_client, page_config).ranking.record_view("1")
    with httpx.Client(base_url=base) as http:
        assert http.get("/item?item=1").headers["x-cache"] == "MISS"
        hit = http.get("/item?item=1&utm_campaign=x")
        assert hit.headers["x-cache"] == "HIT"
        assert hit.text == "item 1"
        assert http.get("/big").headers["x-cache"] == "MISS"
        zipped = http.get("/big", headers={"accept-encoding": "gzip"})
        assert zipped.headers["content-encoding"] == "gzip"
        assert zipped.content == BIG
        etag = zipped.headers["etag"]
        assert http.get("/big", headers={"if-none-match": etag}).status_code == 304
        assert http.get("/me").text == "hello nobody"
        alice = http.get("/me", headers={"cookie": "session=alice"})
        assert alice.text == "hello alice"
        assert "x-cache" not in alice.headers
        assert http.get("/me").headers["x-cache"] == "HIT"
        streamed = [http.get("/stream") for _ in range(2)]
        assert [s.text for s in streamed] == ["chunk 0 chunk 1 chunk 2 "] * 2
        assert [s.headers["x-cache"] for s in streamed] == ["MISS", "MISS"]
    assert shop.renders == 1 + 1 + 2 + 2  # item, big, me x2 (one private), stream x2


def test_flask_stampede_renders_once(
    flask_shop: tuple[FlaskShop, str], sync_client: Any, page_config: Config
) -> None:
    shop, base = flask_shop
    webtier.WebTier(sync_client, page_config).ranking.record_view("2")
    shop.gate.clear()
    with httpx.Client(base_url=base, timeout=60) as http, ThreadPoolExecutor(50) as pool:
        futures = [pool.submit(http.get, "/item?item=2") for _ in range(50)]
        deadline = time.time() + 30
        while shop.renders == 0:
            assert time.time() < deadline
            time.sleep(0.01)
        time.sleep(0.2)
        shop.gate.set()
        responses = [f.result() for f in futures]
    assert {r.text for r in responses} == {"item 2"}
    assert shop.renders == 1


# -- Starlette under uvicorn ----------------------------------------------------------------


async def hot(request: Request) -> Response:
    return Response(BIG, media_type="text/html")


@pytest.fixture
def uvicorn_url(redis_url: str, page_config: Config) -> Iterator[str]:
    client = webtier.connect_async(redis_url)
    tier = webtier.AsyncWebTier(client, page_config)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await cached.aclose()  # flushes the hit/miss counts
        await client.aclose()

    app = Starlette(routes=[Route("/big", hot)], lifespan=lifespan)
    cached = pagecache.ASGIMiddleware(app, tier, RULES)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(cached, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        assert time.time() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


def test_starlette_under_uvicorn(uvicorn_url: str) -> None:
    with httpx.Client(base_url=uvicorn_url) as http:
        assert http.get("/big").headers["x-cache"] == "MISS"
        hit = http.get("/big", headers={"accept-encoding": "gzip"})
        assert hit.headers["x-cache"] == "HIT"
        assert hit.headers["content-encoding"] == "gzip"
        assert hit.content == BIG
        private = http.get("/big", headers={"authorization": "Basic eDp5"})
        assert "x-cache" not in private.headers


def test_hits_and_misses_are_counted(
    uvicorn_url: str, sync_client: Any, page_config: Config
) -> None:
    with httpx.Client(base_url=uvicorn_url) as http:
        for _ in range(3):
            http.get("/big")
    tier = webtier.WebTier(sync_client, page_config)
    deadline = time.time() + 30
    while True:
        hits = sum(n for _, n in tier.counters.get("pagecache:hit", 86400))
        misses = sum(n for _, n in tier.counters.get("pagecache:miss", 86400))
        if (hits, misses) == (2, 1) or time.time() > deadline:
            break
        time.sleep(0.05)
    assert (hits, misses) == (2, 1)
