"""What the tests share: servers and keys, the one op driver, faults,
the row cache's database, the session shop, workers and benchmarks.

Test modules import from here, never from one another (nor from a
``conftest.py``). Fixtures stay in the ``conftest.py`` files; this module
holds plain functions and classes. Sections:

* servers and keys: ``BINARIES``/``TARGETS``, :func:`all_keys`, :func:`wait_for`
* driving operations: :func:`drive` (an op, a web flow or the wire's
  exchange, fed replies by hand), :func:`run_op` (on a tier's own
  transport), :class:`InThread` (the sync facade, awaitable)
* faults: :class:`Stall`, :class:`BackgroundLoad`
* the row cache: :func:`seed`, :class:`Instrumented`, :func:`take_load`...
* sessions: cookies, commands served, HTTP servers in a thread, the session
  shop (Starlette, FastAPI, Flask) and its :func:`visit`, :func:`sampled_pick`
* workers and benchmarks: :func:`slow_job`, :func:`run_smoke`
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import multiprocessing
import multiprocessing.pool
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import anyio
import flask
import httpx
import pytest
import redis.cluster
import sqlalchemy as sa
import uvicorn
from click.testing import CliRunner, Result
from fastapi import Depends, FastAPI
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from werkzeug.serving import make_server

import webtier
from benchmarks.cli import bench
from webtier import ranking
from webtier._core.facade import Part
from webtier._core.keys import shard_of
from webtier._core.protocol import Call, Op, ScriptCall, text, write
from webtier.config import Config
from webtier.demo import shopdb
from webtier.embedded import bundled_redis_server, find_redis_server
from webtier.errors import LateCookie
from webtier.rows import Row, Source
from webtier.rows.ops import FILL, bookkeeping_ms, nonce
from webtier.rows.sql import SqlSource
from webtier.testing import RedisCluster, RedisServer
from webtier.types import JobStep
from webtier.web import sessions
from webtier.web.sessions import AsyncSession, Session
from webtier.web.sessions import flask as flask_sessions
from webtier.workers import Job

# -- servers and keys ------------------------------------------------------------------------


def _binaries() -> dict[str, str]:
    chosen = os.environ.get("WEBTIER_TEST_REDIS_SERVER")
    default = find_redis_server(chosen)
    found = {"standalone": default}
    bundled = bundled_redis_server()
    if bundled and os.path.realpath(bundled) != os.path.realpath(default):
        found["standalone-6.2"] = bundled
    return found


BINARIES = _binaries()
TARGETS = [*BINARIES, "cluster"]


BINARIES = _binaries()
TARGETS = [*BINARIES, "cluster"]


def all_keys(url: str, pattern: str) -> list[bytes]:
    """Every key matching ``pattern`` on a server or on every cluster master."""
    client = webtier.connect(url)
    try:
        if isinstance(client, redis.cluster.RedisCluster):
            nodes = client.get_primaries()
            return sorted(
                key
                for node in nodes
                for key in client.scan_iter(match=pattern, count=1000, target_nodes=node)
            )
        return sorted(client.scan_iter(match=pattern, count=1000))
    finally:
        webtier.disconnect(client)


def wait_for(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Poll ``check`` until it is true; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


# -- driving operations ----------------------------------------------------------------------


class Driven(NamedTuple):
    value: Any  # what the generator returned
    steps: list[Any]  # every step it yielded (each one answered), in order


def drive(
    gen: Generator[Any, Any, Any],
    answers: Iterable[Any] | Callable[[Any], Any] = (),
    *,
    started: bool = False,
    run_calls: bool = False,
) -> Driven:
    """Run the generator ``gen`` -- an operation, a web flow, the wire's
    exchange -- to its end, answering each step it yields by hand, and return
    what it returned and the steps it took (``value, steps = drive(...)``).

    ``answers`` answer the steps in turn: a value is sent in, an exception
    is thrown in, and a callable is called with the step, what it returns
    being answered the same way. ``answers`` may instead be one callable
    that answers every step (by the step's method name, say).
    ``started``: the caller took the first step already (``next(gen)``, to
    look at it); the first answer is for that step.
    ``run_calls``: a :class:`~webtier._core.protocol.Call` step is answered by
    running it (a pause, a ``functools.partial``, is skipped) and takes no
    answer.

    Fails when ``gen`` asks for more steps than there are answers, or ends
    with answers left over. An error ``gen`` raises goes to the caller."""
    if callable(answers):
        answer_of: Callable[[Any], Any] = answers
    else:
        queue = list(answers)
        queue.reverse()

        def answer_of(step: Any) -> Any:
            assert queue, f"the generator wanted an answer to a step not foreseen: {step!r}"
            given = queue.pop()
            return given(step) if callable(given) else given

    steps: list[Any] = []
    answer: Any = None
    try:
        if started:
            answer = answer_of(None)
        else:
            step = next(gen)
            steps.append(step)
            answer = _answer(step, answer_of, run_calls)
        while True:
            if isinstance(answer, BaseException):
                step = gen.throw(answer)
            else:
                step = gen.send(answer)
            steps.append(step)
            answer = _answer(step, answer_of, run_calls)
    except StopIteration as done:
        if not callable(answers):
            assert not queue, f"the generator ended with {len(queue)} answers left"
        return Driven(done.value, steps)


def _answer(step: Any, answer_of: Callable[[Any], Any], run_calls: bool) -> Any:
    if run_calls and isinstance(step, Call):
        if isinstance(step.blocking, functools.partial):  # a pause: skip it
            return None
        return step.blocking()
    return answer_of(step)


async def run_op(tier: Any, op: Op[Any]) -> Any:
    """Run an operation on the tier's own transport, on either API."""
    if isinstance(tier, InThread):
        return await anyio.to_thread.run_sync(tier._wrapped.transport.run, op)
    return await tier.transport.run(op)


class InThread:
    """Exposes a sync facade with awaitable methods, run in a worker thread,
    so one async test body covers the sync API too."""

    def __init__(self, wrapped: Any) -> None:
        self._wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._wrapped, name)
        if isinstance(value, Part):
            return InThread(value)
        if callable(value) and not isinstance(value, type):

            async def call(*args: Any, **kwargs: Any) -> Any:
                return await anyio.to_thread.run_sync(functools.partial(value, *args, **kwargs))

            return call
        return value


# -- processes ---------------------------------------------------------------------------------


def _pid_after(pause: float) -> int:
    time.sleep(pause)  # held a moment, so that each idle process takes one call
    return os.getpid()


@contextlib.contextmanager
def spawned_pool(processes: int) -> Iterator[multiprocessing.pool.Pool]:
    """A pool of ``processes`` spawned processes (a fork would copy the test's
    threads and sockets), each of them started and past its imports: work
    handed out now begins within a moment, even on a busy machine."""
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        seen: set[int] = set()
        for _ in range(100):
            seen.update(pool.map(_pid_after, [0.1] * processes, chunksize=1))
            if len(seen) >= processes:
                break
        else:
            raise RuntimeError(f"only {len(seen)} of {processes} processes started")
        yield pool


# -- faults ----------------------------------------------------------------------------------


class Stall:
    """Blocks the server for ``seconds`` with DEBUG SLEEP, sent synchronously
    on a socket of its own, so the stall is certain to have begun before the
    test goes on, however loaded the machine is."""

    def __init__(self, server: RedisServer, seconds: float) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port))
        self.sock.sendall(f"DEBUG SLEEP {seconds}\r\n".encode())
        time.sleep(0.2)  # an idle server picks it up at once

    def join(self) -> None:
        """Wait for the end of the stall."""
        self.sock.settimeout(60)
        assert self.sock.recv(16).startswith(b"+OK")
        self.sock.close()


def stall(server: RedisServer, seconds: float) -> Stall:
    return Stall(server, seconds)


class BackgroundLoad:
    """Runs ``step`` over and over on a thread while the block runs, for the
    fault tests: counts each outcome by the name ``step`` returns, and
    ``"unavailable"`` when it raises RedisUnavailable (OutcomeUnknown
    included); any other error is kept in ``errors`` and ends the load."""

    def __init__(self, step: Callable[[], str]) -> None:
        self.outcomes: Counter[str] = Counter()
        self.errors: list[BaseException] = []
        self._step = step
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.outcomes[self._step()] += 1
            except webtier.RedisUnavailable:
                self.outcomes["unavailable"] += 1
            except BaseException as error:
                self.errors.append(error)
                return

    def __enter__(self) -> BackgroundLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


# -- the row cache: a seeded shop database, instrumented sources -----------------------------


def seed(engine: sa.Engine, items: int = 50) -> SqlSource:
    """The shop's inventory with items 1..``items``, and its source."""
    shopdb.create(engine, items)
    return shopdb.inventory_source(engine)


def db_row(engine: sa.Engine, item_id: int) -> dict[str, Any] | None:
    """The row as the database has it now."""
    with engine.connect() as conn:
        found = conn.execute(
            sa.select(shopdb.inventory).where(shopdb.inventory.c.item_id == item_id)
        ).first()
    return None if found is None else dict(found._mapping)


def set_stock(engine: sa.Engine, item_id: int, stock: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            shopdb.inventory.update()
            .where(shopdb.inventory.c.item_id == item_id)
            .values(stock=stock)
        )


def delete_item(engine: sa.Engine, item_id: int) -> None:
    with engine.begin() as conn:
        conn.execute(shopdb.inventory.delete().where(shopdb.inventory.c.item_id == item_id))


def run_script(redis_url: str, call: Any) -> Any:
    """Send one script call by hand, as a client that then dies would
    (nothing follows it), and return its reply."""
    assert isinstance(call, ScriptCall)
    client = webtier.connect(redis_url)
    try:
        return client.eval(call.script.source.decode(), len(call.keys), *call.keys, *call.args)
    finally:
        webtier.disconnect(client)


def take_load(
    redis_url: str, config: Config, key: str, lease_ms: int, source: str = "inventory"
) -> str:
    """Take the load of row ``key`` of ``source`` as a reader would, then
    never store: the reader died (or stalls). Returns its ticket."""
    shard = config.keys.row_shard(source, shard_of(key, config.rows.shards))
    keys = (shard.fill, shard.lease, shard.seq, shard.row(key))
    args = (key, lease_ms, "miss", bookkeeping_ms(config.rows), nonce())
    kind, ticket = run_script(redis_url, ScriptCall(FILL, keys, args))
    assert kind == b"load"
    return text(ticket)


class Instrumented(Source):
    """A real source, watched: counts its loads, and can sleep after each
    query or wait at a gate (to place another client's write between a
    load's read and its store)."""

    def __init__(self, inner: Source, *, pause: float = 0.0, gated: bool = False) -> None:
        super().__init__(inner.name)
        self.inner = inner
        self.pause = pause
        self.loads = 0
        self.read = threading.Event()  # set once a load has queried
        self.gate = threading.Event()  # loads wait for it after querying
        if not gated:
            self.gate.set()
        self._lock = threading.Lock()

    def key(self, row_id: object) -> str:
        return self.inner.key(row_id)

    def load(self, keys: Sequence[str]) -> dict[str, Row]:
        rows = self.inner.load(keys)
        with self._lock:
            self.loads += 1
        if self.pause:
            time.sleep(self.pause)
        self.read.set()
        if not self.gate.wait(30):
            raise TimeoutError("the test never opened the gate")
        return rows


# -- sessions: cookies, commands served, servers in a thread ---------------------------------

KEY = b"session-signing-key-of-32-bytes!"
OLD_KEY = b"an-older-signing-key-of-32-bytes"

# Commands that run without any client asking (replication, cluster bus
# checks) or that counting itself sends.
_BACKGROUND = {"info", "replconf", "ping", "cluster", "psync", "sync", "command", "client", "hello"}


def target_servers(target: str, request: pytest.FixtureRequest) -> list[RedisServer]:
    """The servers of ``target`` that clients write to (a cluster's masters)."""
    if target == "cluster":
        cluster: RedisCluster = request.getfixturevalue("cluster")
        return cluster.masters()
    servers: dict[str, RedisServer] = request.getfixturevalue("servers")
    return [servers[target]]


def commands_served(servers: list[RedisServer]) -> int:
    """How many commands clients had ``servers`` run so far (INFO commandstats)."""
    total = 0
    for server in servers:
        with contextlib.closing(server.client(socket_timeout=5)) as client:
            stats: dict[str, Any] = client.info("commandstats")
        for name, figures in stats.items():
            command = name.removeprefix("cmdstat_").split("|")[0]
            if command not in _BACKGROUND:
                total += int(figures["calls"])
    return total


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


def sampled_pick(stored: list[int], cutoff: int, page: int) -> list[Any]:
    """What session_pick.lua answers in 'sample' mode (the integration
    tests hold the script to this)."""
    last = min(page, len(stored)) - 1
    ranks = list(range(min(4, last) + 1))
    rank = 4
    while rank < last:
        rank = min(math.floor(rank * 1.5), last)
        ranks.append(rank)
    reply: list[Any] = [str(cutoff).encode(), len(stored), sum(s < cutoff for s in stored)]
    for rank in ranks:
        reply += [rank, str(stored[rank]).encode()]
    return reply


COOKIE = "webtier_session"


def described(user: str | None, data: Any, cart: Any, viewed: Any) -> dict[str, Any]:
    return {"user": user, "data": data, "cart": cart, "viewed": viewed}


# -- the session shop: Starlette -------------------------------------------------------------


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


# -- the session shop: FastAPI ---------------------------------------------------------------


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


# -- the session shop: Flask -----------------------------------------------------------------


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


# -- the session shop: the visit -------------------------------------------------------------


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


# -- workers and benchmarks ------------------------------------------------------------------


def slow_job(seconds: float, marker: str) -> Job:
    """A job whose step works for ``seconds``, then leaves a marker."""

    def step(cfg: Config, pass_number: int) -> Op[JobStep]:
        time.sleep(seconds)
        yield write(f"{cfg.prefix}:marker", ("INCR", f"{cfg.prefix}:{marker}"), idempotent=False)
        return JobStep(0.01, "slow step done")

    return Job("slow", step)


def run_smoke(
    server: RedisServer, db: int, tmp_path: Path, name: str, rows: list[str], scale: float
) -> dict[str, Any]:
    """Run bench ``name`` on databases ``db`` and ``db + 1`` of ``server`` (no
    other test may use them), check that it reports exactly ``rows`` and
    flushed both databases on the way out; return its JSON report."""
    args = ["--seconds", "0.2", "--processes", "1,2", "--scale", str(scale)]
    result, saved = run_bench_cli(server, db, tmp_path, name, *args)
    for row in rows:
        assert f"| {row} |" in result.stdout
    assert {row["what"] for row in saved["rows"]} == set(rows)
    return saved


def run_bench_cli(
    server: RedisServer, db: int, tmp_path: Path, name: str, *args: str
) -> tuple[Result, dict[str, Any]]:
    """Run ``webtier bench name`` once (``--repeat 1``, Markdown) with ``args``
    on databases ``db`` and ``db + 1`` of ``server`` (no other test may use
    them); check it succeeded and flushed both on the way out; return its
    output and its JSON report."""
    url = f"redis://127.0.0.1:{server.port}/{db}"
    out = tmp_path / f"{name}.json"
    line = [name, "--url", url, "--repeat", "1", *args, "--json", str(out), "--markdown"]

    result = CliRunner().invoke(bench, line)

    assert result.exit_code == 0, result.output
    for number in (db, db + 1):
        client = server.client(db=number)
        try:
            assert client.dbsize() == 0
        finally:
            client.close()
    saved: dict[str, Any] = json.loads(out.read_text())
    return result, saved


# -- the command line and the embedded server ---------------------------------------------


@dataclass(frozen=True)
class Ran:
    """What one run of the webtier command gave."""

    code: int
    stdout: str
    stderr: str


def webtier_cli(*args: str) -> Ran:
    """The webtier command through click's runner, stdout and stderr apart."""
    from click.testing import CliRunner

    from webtier.cli import main

    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def servers_for(socket_path: Path) -> list[int]:
    """Pids of redis-server processes serving ``socket_path``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        # redis-server rewrites its title to "redis-server unixsocket:<path>".
        if b"redis-server" in cmdline and str(socket_path).encode() in cmdline:
            found.append(int(entry.name))
    return found


def wait_until(check: object, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


# -- the item view ranking ------------------------------------------------------------------


def ranking_scores(client: Any, config: Config) -> dict[str, float]:
    """Every item's views, read from each shard of ``config``'s ranking (a
    tier's config: its shard count decided), checking that each item is in
    its own shard."""
    found: dict[str, float] = {}
    shards = ranking.ops.shards_of(config)
    for shard in shards:
        for item, score in client.zrange(shard.viewed, 0, -1, withscores=True):
            name = item.decode()
            assert ranking.ops.shard_for(config, name) == shard, f"{name} in the wrong shard"
            found[name] = score
    return found


# -- ASGI --------------------------------------------------------------------------------------


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
