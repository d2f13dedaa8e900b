"""Timing middleware on real apps: Starlette (ASGI) and Flask (WSGI, served
over HTTP by Werkzeug's server), on every Redis target."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import flask
import httpx
import pytest
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Host, Mount, Route, Router
from starlette.types import Receive, Scope, Send
from werkzeug.serving import make_server

import webtier
from tests.helpers.servers import all_keys
from tests.helpers.web import asgi_lifespan
from webtier.web import timing
from webtier.web.timing import ROUTE_KEY, UNMATCHED
from webtier.web.timing import flask as flask_timing

ACCESS = "AccessTime"
pytestmark = pytest.mark.usefixtures("steady_hour")


class Boom(Exception):
    pass


# -- Starlette ----------------------------------------------------------------------------


async def item(request: Request) -> Response:
    return PlainTextResponse(f"item {request.path_params['id']}")


async def ok(request: Request) -> Response:
    return PlainTextResponse("ok")


async def boom(request: Request) -> Response:
    raise Boom


async def busy(request: Request) -> Response:
    return PlainTextResponse("try later", status_code=503)


async def stream(request: Request) -> Response:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(3):
            await asyncio.sleep(0.03)
            yield b"chunk "

    return StreamingResponse(chunks())


async def after(request: Request) -> Response:
    return PlainTextResponse("sent", background=BackgroundTask(asyncio.sleep, 0.5))


async def files(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse(scope["path"])(scope, receive, send)


def starlette_app(tier: webtier.AsyncWebTier, batched: bool = True) -> Starlette:
    routes = [
        Route("/item/{id:int}", item),
        Route("/boom", boom),
        Route("/busy", busy),
        Route("/stream", stream),
        Route("/after", after),
        Route("/orders", ok, methods=["POST"]),
        Mount(
            "/api",
            routes=[
                Route("/users/{uid}", ok),
                Mount("/v2", routes=[Route("/things/{tid:int}", ok)]),
            ],
        ),
        Mount("/static", app=files),
        Host("admin.shop.test", app=Router([Route("/dash", ok)])),
    ]
    timed = Middleware(timing.ASGIMiddleware, tier=tier, batched=batched)
    return Starlette(routes=routes, middleware=[timed])


@pytest.fixture
def atier(async_client: Any, config: webtier.Config) -> webtier.AsyncWebTier:
    return webtier.AsyncWebTier(async_client, config)


@pytest.mark.anyio
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "one-by-one"])
async def test_starlette_requests_are_timed_by_route_template(
    atier: webtier.AsyncWebTier, redis_url: str, prefix: str, batched: bool
) -> None:
    app = starlette_app(atier, batched)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    client = httpx.AsyncClient(transport=transport, base_url="http://shop.test")
    async with asgi_lifespan(app), client as http:  # its shutdown flushes
        for path in ["/item/1", "/item/2", "/item/3?color=red", "/item/abc", "/nowhere/x"]:
            await http.get(path)
        assert (await http.get("/boom")).status_code == 500
        assert (await http.get("/busy")).status_code == 503
        assert (await http.get("/orders")).status_code == 405
        await http.get("/stream")
        await http.get("/after")
        await http.get("/api/users/7")
        await http.get("/api/v2/things/9")
        await http.get("/static/css/site.css")
        await http.get("http://admin.shop.test/dash")

    contexts = {
        "/item/{id}": (3, 0),
        UNMATCHED: (2, 0),  # /item/abc (not an int) and /nowhere/x
        "/boom": (1, 1),
        "/busy": (1, 1),
        "/orders": (1, 0),  # the route's 405
        "/stream": (1, 0),
        "/after": (1, 0),
        "/api/users/{uid}": (1, 0),
        "/api/v2/things/{tid}": (1, 0),
        "/static/{path}": (1, 0),
        "/dash": (1, 0),
    }
    found = await atier.stats.get_many(list(contexts), ACCESS)
    assert {c: (s.count, s.errors) for c, s in found.items()} == contexts
    assert found["/stream"].min >= 0.09  # the whole stream, not its first chunk
    assert found["/after"].max < 0.5  # the background task runs after the response
    # Raw paths never became contexts (nor keys).
    assert not [k for k in all_keys(redis_url, f"{prefix}:*") if b"/item/1" in k]
    assert {c for c, _ in await atier.stats.slowest(100)} == set(contexts)


@pytest.mark.anyio
async def test_non_http_scopes_pass_through(atier: webtier.AsyncWebTier, redis_url: str) -> None:
    seen = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    middleware = timing.ASGIMiddleware(app, atier)

    async def receive() -> dict[str, Any]:
        return {}

    async def send(message: Any) -> None:
        return None

    await middleware({"type": "lifespan"}, receive, send)
    await middleware({"type": "websocket", "path": "/ws"}, receive, send)
    assert seen == ["lifespan", "websocket"]
    assert await atier.stats.slowest(10) == []


# -- Flask over real HTTP -----------------------------------------------------------------------


def flask_app(tier: webtier.WebTier, propagate: bool = False) -> flask.Flask:
    app = flask.Flask(__name__)
    app.config["PROPAGATE_EXCEPTIONS"] = propagate

    @app.get("/item/<int:id>")
    def show(id: int) -> str:
        return f"item {id}"

    @app.get("/boom")
    def explode() -> str:
        raise Boom

    @app.get("/busy")
    def refuse() -> tuple[str, int]:
        return "try later", 503

    @app.get("/stream")
    def streamed() -> flask.Response:
        def chunks() -> Iterator[str]:
            for _ in range(3):
                threading.Event().wait(0.03)
                yield "chunk "

        return flask.Response(chunks())

    api = flask.Blueprint("api", __name__, url_prefix="/api")

    @api.get("/users/<uid>")
    def user(uid: str) -> str:
        return uid

    app.register_blueprint(api)
    flask_timing.install(app, tier)
    return app


@pytest.fixture
def serve() -> Iterator[Any]:
    servers = []

    def start(app: flask.Flask) -> str:
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append((server, app))
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server, app in servers:
        server.shutdown()
        server.server_close()
        # The timing middleware's recorder thread ends with it: left running,
        # it would outlive the test's client (and, on a Cluster, redis-py's
        # node discovery would draw from the global random state under other
        # tests' Hypothesis).
        app.wsgi_app.close()  # type: ignore[attr-defined]


def test_flask_requests_are_timed_by_url_rule(
    sync_client: Any, config: webtier.Config, serve: Any
) -> None:
    tier = webtier.WebTier(sync_client, config)
    base = serve(flask_app(tier))
    with httpx.Client(base_url=base) as http:
        for path in ["/item/1", "/item/2?x=1", "/item/abc", "/nowhere"]:
            http.get(path)
        assert http.get("/boom").status_code == 500
        assert http.get("/busy").status_code == 503
        assert http.get("/stream").text == "chunk " * 3
        http.get("/api/users/ann")

    contexts = {
        "/item/<int:id>": (2, 0),
        UNMATCHED: (2, 0),
        "/boom": (1, 1),
        "/busy": (1, 1),
        "/stream": (1, 0),
        "/api/users/<uid>": (1, 0),
    }
    # The server closes a response (and the middleware records it) after the
    # client has it all: wait for the last one.
    deadline = time.monotonic() + 5
    while True:
        found = tier.stats.get_many(list(contexts), ACCESS)
        counts = {c: (s.count, s.errors) for c, s in found.items()}
        if counts == contexts or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert counts == contexts
    assert found["/stream"].min >= 0.09  # type: ignore[operator]


def test_an_exception_through_the_middleware_is_recorded_and_raised(
    sync_client: Any, config: webtier.Config
) -> None:
    tier = webtier.WebTier(sync_client, config)
    app = flask_app(tier, propagate=True)
    with pytest.raises(Boom):
        app.test_client().get("/boom")
    app.wsgi_app.close()  # type: ignore[attr-defined]  # flushes
    summary = tier.stats.get("/boom", ACCESS)
    assert (summary.count, summary.errors) == (1, 1)


def test_any_wsgi_app_can_name_its_route_and_a_failing_stream_is_an_error(
    sync_client: Any, config: webtier.Config
) -> None:
    tier = webtier.WebTier(sync_client, config)

    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        if environ["PATH_INFO"].startswith("/plain/"):
            environ[ROUTE_KEY] = "/plain/{name}"
        start_response("200 OK", [("Content-Type", "text/plain")])
        yield b"first chunk"
        if environ["PATH_INFO"].endswith("/fail"):
            raise Boom

    timed = timing.WSGIMiddleware(app, tier)

    def serve(path: str) -> None:
        """What a WSGI server does (PEP 3333): iterate, then close."""
        body = timed({"PATH_INFO": path, "REQUEST_METHOD": "GET"}, lambda *args: None)
        try:
            for _ in body:
                pass
        finally:
            body.close()  # type: ignore[attr-defined]

    serve("/plain/a")
    with pytest.raises(Boom):
        serve("/plain/fail")
    serve("/elsewhere")
    timed.close()  # flushes; requests after it record one by one
    serve("/elsewhere")
    found = tier.stats.get_many(["/plain/{name}", UNMATCHED], ACCESS)
    assert (found["/plain/{name}"].count, found["/plain/{name}"].errors) == (2, 1)
    assert found[UNMATCHED].count == 2
