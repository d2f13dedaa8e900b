"""``webtier bench sessions --frameworks``: webtier's framework session
adapters side by side with the Redis sessions their users have today, in
one run, on the same server:

* Django -- ``SESSION_ENGINE = "webtier.web.sessions.django"`` vs Django's
  cache backend (``django.contrib.sessions.backends.cache``) on
  ``django_redis.cache.RedisCache``;
* Flask -- ``webtier.web.sessions.flask.SessionInterface`` vs Flask-Session's
  Redis interface;
* Starlette -- webtier's ASGI middleware with ``scope_session=True`` vs
  starsessions' ``SessionMiddleware`` on its ``RedisStore``.

The request reads the session (a counter and ten other keys) and changes
one key. Each pair gets two rows: Redis round trips per request, counted
exactly (every ``send_packed_command`` of redis-py's connections, sync and
asyncio: a pipeline is one), and requests/s through the framework's own
in-process test client (Django's ``Client``, Flask's ``test_client``,
httpx's ``ASGITransport``), one client, the two sides taking turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any
from unittest import mock

import redis
import redis.asyncio
import redis.asyncio.connection
import redis.connection

from benchmarks import _django_session_urls
from benchmarks._harness import Harness
from benchmarks._results import Goal, Measurement, Row
from webtier._core.mux.link import Link
from webtier.config import Config
from webtier.connect import connect, connect_async

TITLE = "webtier bench sessions --frameworks"

SEEDED = _django_session_urls.SEEDED
WARMUP = 20  # requests before counting: connections made, scripts loaded
COUNTED = 100  # requests whose round trips are counted
BATCH = 25  # requests between two reads of the clock (and per entry into asyncio)

TRIP_GOALS = (Goal(0.5, at_least=False),)
RATE_GOALS = (Goal(1.5),)

# A side: given the server's URL, an open app and client whose session is
# seeded; it yields ``batch(n)``, which sends n requests that read the
# session and change one key.
Batch = Callable[[int], object]
Side = Callable[[str], AbstractContextManager[Batch]]


def run(h: Harness) -> list[Row]:
    """Every framework's pair, in the order of the report."""
    pairs = [
        (
            "Django",
            _django_webtier,
            _django_cache,
            "webtier's SessionStore vs django.contrib.sessions.backends.cache "
            "on django_redis.cache.RedisCache",
        ),
        (
            "Flask",
            _flask_webtier,
            _flask_session,
            "webtier's SessionInterface vs Flask-Session's Redis interface",
        ),
        (
            "Starlette",
            _starlette_webtier,
            _starsessions,
            "webtier's ASGIMiddleware(scope_session=True) vs starsessions' "
            "SessionMiddleware on its RedisStore",
        ),
    ]
    h.notes.append(
        f"round trips: every send to Redis over {COUNTED} requests (a pipeline is one); "
        "requests/s: one in-process test client of the framework, the sides taking turns"
    )
    rows: list[Row] = []
    for framework, ours, theirs, note in pairs:
        rows.extend(_pair(h, framework, ours, theirs, note))
    h.server.flush()
    return rows


def _pair(h: Harness, framework: str, ours: Side, theirs: Side, note: str) -> list[Row]:
    h.server.flush()
    repeat = h.settings.repeat
    trips: dict[str, list[float]] = {"webtier": [], "anchor": []}
    rates: dict[str, list[float]] = {"webtier": [], "anchor": []}
    with ours(h.server.url) as our_batch, theirs(h.server.book_url) as their_batch:
        sides = {"webtier": our_batch, "anchor": their_batch}
        h.ticker.begin(f"{framework}: webtier vs the anchor", repeat * len(sides))
        # The two sides take turns, so that drift of a shared machine hurts both.
        for round_number in range(repeat):
            for name, batch in sides.items():
                h.say(f"{framework}, {name}: run {round_number + 1}/{repeat}")
                trips[name].append(_round_trips(batch))
                rates[name].append(_rate(batch, h.settings.seconds))
                h.ticker.tick()

    def row(what: str, unit: str, found: dict[str, list[float]], goals: tuple[Goal, ...]) -> Row:
        ours, anchor = (
            h.record(Measurement(f"{framework} {name}", 1, unit, tuple(found[name])))
            for name in ("webtier", "anchor")
        )
        return Row(f"{framework}: {what}", unit, 1, ours, anchor, goals=goals, note=note)

    note += "; the book column is the anchor"
    return [
        row("round trips per request", "round trips/request", trips, TRIP_GOALS),
        row("requests/s", "requests/s", rates, RATE_GOALS),
    ]


def _round_trips(batch: Batch) -> float:
    """Round trips to Redis per request over :data:`COUNTED` requests: the
    sends of redis-py's connections (sync and asyncio) and of webtier's
    asyncio client (a pipeline is one send; the one client waits for each
    reply before its next send)."""
    sent = 0
    # redis-py's sync connection has no annotations
    sync_send: Callable[..., Any] = redis.connection.AbstractConnection.send_packed_command
    async_send = redis.asyncio.connection.AbstractConnection.send_packed_command
    mux_send = Link.send

    def counted(conn: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal sent
        sent += 1
        return sync_send(conn, command, *args, **kwargs)

    async def counted_async(conn: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal sent
        sent += 1
        return await async_send(conn, command, *args, **kwargs)

    def counted_mux(link: Link, packed: bytes, count: int) -> Any:
        nonlocal sent
        sent += 1
        return mux_send(link, packed, count)

    with (
        mock.patch.object(redis.connection.AbstractConnection, "send_packed_command", counted),
        mock.patch.object(
            redis.asyncio.connection.AbstractConnection, "send_packed_command", counted_async
        ),
        mock.patch.object(Link, "send", counted_mux),
    ):
        batch(COUNTED)
    return sent / COUNTED


def _rate(batch: Batch, seconds: float) -> float:
    done = 0
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        batch(BATCH)
        done += BATCH
    return done / elapsed


def _seeded(framework: str, get: Callable[[str], tuple[int, str]]) -> Batch:
    """Seed the session through ``get`` (a path -> the status and body of a
    synchronous test client's GET), check it is kept, and return ``batch``."""

    def send(n: int) -> list[str]:
        answers = []
        for _ in range(n):
            status, body = get("/touch")
            if status != 200:
                raise RuntimeError(f"{framework} answered {status}")
            answers.append(body)
        return answers

    get("/seed")
    _checked(send(WARMUP), 1)
    return send


def _checked(answers: list[str], first: int) -> None:
    """The counter went up by one a request: the session was kept."""
    expected = [str(n) for n in range(first, first + len(answers))]
    if answers != expected:
        raise RuntimeError(f"the session was not kept across requests: {answers[:5]}...")


# -- Django ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _django(**engine: Any) -> Iterator[Batch]:
    import django
    from django.conf import settings
    from django.test import Client, override_settings

    if not settings.configured:
        settings.configure(
            DEBUG=False,
            SECRET_KEY="only-for-this-benchmark",
            ALLOWED_HOSTS=["*"],
            INSTALLED_APPS=[],
            DATABASES={},
            USE_TZ=True,
        )
        django.setup()
    with override_settings(
        ROOT_URLCONF="benchmarks._django_session_urls",
        MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware"],
        **engine,
    ):
        client = Client()

        def get(path: str) -> tuple[int, str]:
            response = client.get(path)
            return response.status_code, response.content.decode()

        yield _seeded("Django", get)


@contextlib.contextmanager
def _django_webtier(url: str) -> Iterator[Batch]:
    from webtier.sync import WebTier

    client = connect(url)
    try:
        tier = WebTier(client, Config())
        engine = "webtier.web.sessions.django"
        with _django(SESSION_ENGINE=engine, WEBTIER_SESSIONS={"tier": tier}) as batch:
            yield batch
    finally:
        client.close()


@contextlib.contextmanager
def _django_cache(url: str) -> Iterator[Batch]:
    from django.core.cache import caches

    cache = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": url}}
    try:
        with _django(SESSION_ENGINE="django.contrib.sessions.backends.cache", CACHES=cache) as b:
            yield b
    finally:
        caches.close_all()


# -- Flask -------------------------------------------------------------------------------------


def _flask_app(configure: Callable[[Any], None]) -> Any:
    import flask

    app = flask.Flask(__name__)
    configure(app)

    @app.get("/seed")
    def seed() -> str:
        for i in range(SEEDED):
            flask.session[f"key{i}"] = f"value {i}"
        return "seeded"

    @app.get("/touch")
    def touch() -> str:
        count = int(flask.session.get("n", 0)) + 1
        flask.session["n"] = count
        return str(count)

    return app


@contextlib.contextmanager
def _flask(configure: Callable[[Any], None]) -> Iterator[Batch]:
    client = _flask_app(configure).test_client()

    def get(path: str) -> tuple[int, str]:
        response = client.get(path)
        return response.status_code, response.get_data(as_text=True)

    yield _seeded("Flask", get)


@contextlib.contextmanager
def _flask_webtier(url: str) -> Iterator[Batch]:
    from webtier.sync import WebTier
    from webtier.web.sessions.flask import SessionInterface

    client = connect(url)

    def configure(app: Any) -> None:
        app.session_interface = SessionInterface(WebTier(client, Config()))

    try:
        with _flask(configure) as batch:
            yield batch
    finally:
        client.close()


@contextlib.contextmanager
def _flask_session(url: str) -> Iterator[Batch]:
    from flask_session import Session

    client = redis.Redis.from_url(url)

    def configure(app: Any) -> None:
        app.config.update(SESSION_TYPE="redis", SESSION_REDIS=client)
        Session(app)

    try:
        with _flask(configure) as batch:
            yield batch
    finally:
        client.close()


# -- Starlette ---------------------------------------------------------------------------------


def _starlette_app(*, load: bool) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starsessions import load_session

    async def seed(request: Request) -> PlainTextResponse:
        if load:
            await load_session(request)
        for i in range(SEEDED):
            request.session[f"key{i}"] = f"value {i}"
        return PlainTextResponse("seeded")

    async def touch(request: Request) -> PlainTextResponse:
        if load:
            await load_session(request)
        count = int(request.session.get("n", 0)) + 1
        request.session["n"] = count
        return PlainTextResponse(str(count))

    return Starlette(routes=[Route("/seed", seed), Route("/touch", touch)])


@contextlib.contextmanager
def _starlette(app: Any, closing: Callable[[], Any]) -> Iterator[Batch]:
    import httpx

    # Both sides' cookies are Secure by default: https, as a deployment serves them.
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="https://testserver")

    async def send(n: int) -> list[str]:
        answers = []
        for _ in range(n):
            response = await http.get("/touch")
            if response.status_code != 200:
                raise RuntimeError(f"Starlette answered {response.status_code}")
            answers.append(response.text)
        return answers

    with asyncio.Runner() as runner:
        try:
            runner.run(http.get("/seed"))
            _checked(runner.run(send(WARMUP)), 1)
            yield lambda n: runner.run(send(n))
        finally:
            runner.run(http.aclose())
            runner.run(closing())


@contextlib.contextmanager
def _starlette_webtier(url: str) -> Iterator[Batch]:
    from webtier.aio import WebTier as AsyncWebTier
    from webtier.web import sessions

    client = connect_async(url)
    app = _starlette_app(load=False)
    app.add_middleware(
        sessions.ASGIMiddleware, tier=AsyncWebTier(client, Config()), scope_session=True
    )
    with _starlette(app, client.aclose) as batch:
        yield batch


@contextlib.contextmanager
def _starsessions(url: str) -> Iterator[Batch]:
    from starsessions import SessionMiddleware
    from starsessions.stores.redis import RedisStore

    client = redis.asyncio.Redis.from_url(url)
    app = _starlette_app(load=True)
    app.add_middleware(SessionMiddleware, store=RedisStore(connection=client))
    with _starlette(app, client.aclose) as batch:
        yield batch
