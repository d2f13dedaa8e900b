"""Web apps for the middleware tests: servers in a thread (Werkzeug,
uvicorn), an ASGI lifespan, cookies, and the session shop on Starlette,
FastAPI and Flask with :func:`visit`, the walk every adapter is held to."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import flask
import httpx
import uvicorn
from fastapi import Depends, FastAPI
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from werkzeug.serving import make_server

import webtier
from webtier.errors import LateCookie
from webtier.web import sessions
from webtier.web.sessions import AsyncSession, Session
from webtier.web.sessions import flask as flask_sessions

KEY = b"session-signing-key-of-32-bytes!"


OLD_KEY = b"an-older-signing-key-of-32-bytes"


def set_cookies(headers: Any) -> list[str]:
    """The Set-Cookie values of an httpx response."""
    return list(headers.get_list("set-cookie"))


def cookie_value(set_cookie: str) -> str:
    return set_cookie.split(";", 1)[0].split("=", 1)[1]


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serves the WSGI ``app`` over HTTP with Werkzeug's threaded server."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)


@contextlib.contextmanager
def uvicorn_serving(app: Any, **settings: Any) -> Iterator[str]:
    """Serves ``app`` with uvicorn on a free loopback port, in a thread;
    ``settings`` go to uvicorn's Config (TLS files...)."""
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets whose proto
    # says TCP, and without it each response waits out a delayed ACK (40 ms).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="on", log_level="warning", **settings)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            threading.Event().wait(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@contextlib.asynccontextmanager
async def asgi_lifespan(app: Any) -> AsyncIterator[None]:
    """What an ASGI server does around serving ``app``: the lifespan's
    startup before, its shutdown after (httpx's ASGITransport runs neither)."""
    to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    from_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    task = asyncio.get_running_loop().create_task(app(scope, to_app.get, from_app.put))
    await to_app.put({"type": "lifespan.startup"})
    assert (await from_app.get())["type"] == "lifespan.startup.complete"
    try:
        yield
    finally:
        await to_app.put({"type": "lifespan.shutdown"})
        assert (await from_app.get())["type"] == "lifespan.shutdown.complete"
        await task


COOKIE = "webtier_session"


def described(user: str | None, data: Any, cart: Any, viewed: Any) -> dict[str, Any]:
    return {"user": user, "data": data, "cart": cart, "viewed": viewed}


def _session(request: Request) -> AsyncSession:
    session: AsyncSession = request.state.session
    return session


async def home(request: Request) -> Response:
    return PlainTextResponse("home")  # never asks for the session


async def me(request: Request) -> Response:
    s = _session(request)
    viewed = await s.recently_viewed()
    return JSONResponse(described(await s.user(), await s.data(), await s.cart(), viewed))


async def view(request: Request) -> Response:
    await _session(request).record_view(request.path_params["item"])
    return PlainTextResponse("viewed")


async def add(request: Request) -> Response:
    params = request.path_params
    await _session(request).set_cart(params["item"], params["count"])
    return PlainTextResponse("added")


async def remember(request: Request) -> Response:
    await _session(request).update({request.path_params["name"]: request.path_params["value"]})
    return PlainTextResponse("remembered")


async def login(request: Request) -> Response:
    await _session(request).login(request.path_params["user"])
    return PlainTextResponse("welcome")


async def logout(request: Request) -> Response:
    await _session(request).logout()
    return PlainTextResponse("bye")


async def late_login(request: Request) -> Response:
    session = _session(request)

    async def body() -> Any:
        yield b"started "
        try:
            await session.login("late")
        except LateCookie:
            yield b"refused"

    return StreamingResponse(body())


STARLETTE_ROUTES = [
    Route("/home", home),
    Route("/me", me),
    Route("/view/{item}", view, methods=["POST"]),
    Route("/cart/{item}/{count:int}", add, methods=["POST"]),
    Route("/data/{name}/{value}", remember, methods=["POST"]),
    Route("/login/{user}", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/late-login", late_login, methods=["POST"]),
]


def starlette_shop(
    tier: webtier.AsyncWebTier, *, lifespan: Any = None, **options: Any
) -> Starlette:
    middleware = [Middleware(sessions.ASGIMiddleware, tier=tier, **options)]
    return Starlette(routes=STARLETTE_ROUTES, middleware=middleware, lifespan=lifespan)


# Module level: FastAPI resolves the (string) annotations in the module's names.
FastSession = Annotated[AsyncSession, Depends(sessions.request_session)]


def fastapi_shop(tier: webtier.AsyncWebTier, **options: Any) -> FastAPI:
    app = FastAPI()
    app.add_middleware(sessions.ASGIMiddleware, tier=tier, **options)

    @app.get("/home")
    async def show_home() -> str:
        return "home"

    @app.get("/me")
    async def show_me(s: FastSession) -> dict[str, Any]:
        return described(await s.user(), await s.data(), await s.cart(), await s.recently_viewed())

    @app.post("/view/{item}")
    async def show_item(item: str, s: FastSession) -> str:
        await s.record_view(item)
        return "viewed"

    @app.post("/cart/{item}/{count}")
    async def add_item(item: str, count: int, s: FastSession) -> str:
        await s.set_cart(item, count)
        return "added"

    @app.post("/data/{name}/{value}")
    async def remember_value(name: str, value: str, s: FastSession) -> str:
        await s.update({name: value})
        return "remembered"

    @app.post("/login/{user}")
    async def log_in(user: str, s: FastSession) -> str:
        await s.login(user)
        return "welcome"

    @app.post("/logout")
    async def log_out(s: FastSession) -> str:
        await s.logout()
        return "bye"

    return app


def flask_shop(tier: webtier.WebTier, **options: Any) -> flask.Flask:
    app = flask.Flask(__name__)

    @app.get("/home")
    def show_home() -> str:
        return "home"

    @app.get("/me")
    def show_me() -> Any:
        s: Session = flask_sessions.current_session()
        return described(s.user(), s.data(), s.cart(), s.recently_viewed())

    @app.post("/view/<item>")
    def show_item(item: str) -> str:
        flask_sessions.current_session().record_view(item)
        return "viewed"

    @app.post("/cart/<item>/<int:count>")
    def add_item(item: str, count: int) -> str:
        flask_sessions.current_session().set_cart(item, count)
        return "added"

    @app.post("/data/<name>/<value>")
    def remember_value(name: str, value: str) -> str:
        flask_sessions.current_session().update({name: value})
        return "remembered"

    @app.post("/login/<user>")
    def log_in(user: str) -> str:
        flask_sessions.current_session().login(user)
        return "welcome"

    @app.post("/logout")
    def log_out() -> str:
        flask_sessions.current_session().logout()
        return "bye"

    flask_sessions.install(app, tier, **options)
    return app


async def visit(http: httpx.AsyncClient, *, secure: bool = True) -> dict[str, Any]:
    """Walks a shopper through the shop, checking what each step must do;
    returns the cookies it saw (``first``, ``logged_in``)."""

    async def call(method: str, path: str, cookie: str | None = None) -> httpx.Response:
        headers = {"cookie": f"{COOKIE}={cookie}"} if cookie else {}
        response = await http.request(method, path, headers=headers)
        assert response.status_code == 200, response.text
        return response

    async def me(cookie: str | None) -> dict[str, Any]:
        return json.loads((await call("GET", "/me", cookie)).text)  # type: ignore[no-any-return]

    # Browsing costs no session: no cookie comes back.
    assert set_cookies((await call("GET", "/home")).headers) == []
    anonymous = await call("GET", "/me")
    assert set_cookies(anonymous.headers) == []
    assert json.loads(anonymous.text) == described(None, {}, {}, [])

    # The first write makes the session and sends its cookie, with safe flags.
    [first_set] = set_cookies((await call("POST", "/view/book")).headers)
    attributes = {a.strip().lower() for a in first_set.split(";")[1:]}
    assert {"httponly", "samesite=lax", "path=/"} <= attributes
    assert ("secure" in attributes) is secure
    first = cookie_value(first_set)
    for path in ["/cart/book/2", "/cart/pen/1", "/data/color/red", "/view/pen"]:
        assert set_cookies((await call("POST", path, first)).headers) == []
    assert await me(first) == described(
        None, {"color": "red"}, {"book": 2, "pen": 1}, ["pen", "book"]
    )

    # Login rotates the token: the old cookie is dead at once, all carried over.
    [login_set] = set_cookies((await call("POST", "/login/ann", first)).headers)
    logged_in = cookie_value(login_set)
    assert logged_in != first
    assert await me(logged_in) == described(
        "ann", {"color": "red"}, {"book": 2, "pen": 1}, ["pen", "book"]
    )
    replayed = await call("GET", "/me", first)
    assert json.loads(replayed.text) == described(None, {}, {}, [])
    # Left alone: a request racing the login must not delete its new cookie.
    assert set_cookies(replayed.headers) == []

    # Logout ends the session and clears the cookie.
    [logout_set] = set_cookies((await call("POST", "/logout", logged_in)).headers)
    assert cookie_value(logout_set) == ""
    assert "max-age=0" in logout_set.lower()
    assert (await me(logged_in))["user"] is None
    return {"first": first, "logged_in": logged_in}


def lost_updates(base: str, cookie: str, parallel: int) -> int:
    """Two clients of one session (its cookie named ``cookie``), each sending
    ``parallel`` requests at once that set a key of its own (``/put/<key>``;
    ``/keys`` answers the session's keys): how many of the 2 x ``parallel``
    keys are missing at the end."""
    with httpx.Client(base_url=base) as first:
        first.get("/put/start")
        cookies = {cookie: first.cookies[cookie]}

    def requests(name: str) -> None:
        with httpx.Client(base_url=base, cookies=cookies) as http:
            for i in range(parallel):
                assert http.get(f"/put/{name}{i}").status_code == 200

    workers = [threading.Thread(target=requests, args=(name,)) for name in "ab"]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    kept = set(httpx.get(f"{base}/keys", cookies=cookies).json())
    return sum(f"{name}{i}" not in kept for name in "ab" for i in range(parallel))
