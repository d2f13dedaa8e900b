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

from benchmarks import _session_apps
from benchmarks._harness import Harness
from benchmarks._results import Goal, Measurement, Row
from webtier._core.mux.link import Link

TITLE = "webtier bench sessions --frameworks"

WARMUP = 20  # requests before counting: connections made, scripts loaded
COUNTED = 100  # requests whose round trips are counted
BATCH = 25  # requests between two reads of the clock (and per entry into asyncio)

TRIP_GOALS = (Goal(0.5, at_least=False),)
RATE_GOALS = (Goal(1.5),)

# A side: given the side's name and the server's URL, an open app and client
# whose session is seeded; it yields ``batch(n, path)``, which sends n
# requests to ``/touch`` (read the session, change one key) or ``/read``
# (read it, change nothing).
Batch = Callable[[int, str], object]  # (requests, path)
Side = Callable[[str, str], AbstractContextManager[Batch]]

NOTES = {
    "Django": "webtier's SessionStore vs django.contrib.sessions.backends.cache "
    "on django_redis.cache.RedisCache",
    "Flask": "webtier's SessionInterface vs Flask-Session's Redis interface",
    "Starlette": "webtier's ASGIMiddleware(scope_session=True) vs starsessions' "
    "SessionMiddleware on its RedisStore",
}


def run(h: Harness) -> list[Row]:
    """Every framework's pair, in the order of the report."""
    h.notes.append(
        f"round trips: every send to Redis over {COUNTED} requests (a pipeline is one); "
        "requests/s: one in-process test client of the framework, the sides taking turns"
    )
    rows: list[Row] = []
    for framework, side in IN_PROCESS.items():
        rows.extend(_pair(h, framework, side))
    h.server.flush()
    return rows


def round_trips(h: Harness, framework: str) -> dict[str, dict[str, list[float]]]:
    """Round trips per request of each side of ``framework``, counted in
    process ``repeat`` times (the count is exact: the runs agree), by path:
    ``/touch`` reads the session and changes one key, ``/read`` changes
    nothing."""
    side = IN_PROCESS[framework]
    h.server.flush()
    with side("webtier", h.server.url) as ours, side("anchor", h.server.book_url) as theirs:
        batches = {"webtier": ours, "anchor": theirs}
        return {
            path: {
                name: [_round_trips(batch, path) for _ in range(h.settings.repeat)]
                for name, batch in batches.items()
            }
            for path in ("/touch", "/read")
        }


UNCHANGED = "round trips per request that changes nothing"


def _pair(h: Harness, framework: str, side: Side) -> list[Row]:
    h.server.flush()
    repeat = h.settings.repeat
    trips: dict[str, list[float]] = {"webtier": [], "anchor": []}
    unchanged: dict[str, list[float]] = {"webtier": [], "anchor": []}
    rates: dict[str, list[float]] = {"webtier": [], "anchor": []}
    with side("webtier", h.server.url) as our_batch, side("anchor", h.server.book_url) as theirs:
        sides = {"webtier": our_batch, "anchor": theirs}
        h.ticker.begin(f"{framework}: webtier vs the anchor", repeat * len(sides))
        # The two sides take turns, so that drift of a shared machine hurts both.
        for round_number in range(repeat):
            for name, batch in sides.items():
                h.say(f"{framework}, {name}: run {round_number + 1}/{repeat}")
                trips[name].append(_round_trips(batch))
                unchanged[name].append(_round_trips(batch, "/read"))
                rates[name].append(_rate(batch, h.settings.seconds))
                h.ticker.tick()

    note = NOTES[framework] + "; the book column is the anchor"
    return [
        comparison(h, framework, "round trips per request", "round trips/request", trips,
                   TRIP_GOALS, note),
        comparison(h, framework, UNCHANGED, "round trips/request", unchanged, (), note),
        comparison(h, framework, "requests/s", "requests/s", rates, RATE_GOALS, note),
    ]  # fmt: skip


def comparison(
    h: Harness,
    framework: str,
    what: str,
    unit: str,
    found: dict[str, list[float]],
    goals: tuple[Goal, ...],
    note: str,
    raw: list[float] | None = None,
) -> Row:
    """A row of webtier's side against the anchor (the book column), and the
    framework alone (the raw column) when measured."""
    ours, anchor = (
        h.record(Measurement(f"{framework} {name} {what}", 1, unit, tuple(found[name])))
        for name in ("webtier", "anchor")
    )
    alone = None
    if raw:
        alone = h.record(Measurement(f"{framework} alone {what}", 1, unit, tuple(raw)))
    return Row(f"{framework}: {what}", unit, 1, ours, anchor, alone, goals=goals, note=note)


def _round_trips(batch: Batch, path: str = "/touch") -> float:
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
        batch(COUNTED, path)
    return sent / COUNTED


def _rate(batch: Batch, seconds: float) -> float:
    done = 0
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        batch(BATCH, "/touch")
        done += BATCH
    return done / elapsed


def _seeded(framework: str, get: Callable[[str], tuple[int, str]]) -> Batch:
    """Seed the session through ``get`` (a path -> the status and body of a
    synchronous test client's GET), check it is kept, and return ``batch``."""

    def send(n: int, path: str = "/touch") -> list[str]:
        answers = []
        for _ in range(n):
            status, body = get(path)
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
def _django(side: str, url: str) -> Iterator[Batch]:
    import django
    from django.conf import settings
    from django.test import Client, override_settings

    if not settings.configured:
        settings.configure(**_session_apps.DJANGO_BASE)
        django.setup()
    engine, close = _session_apps.django_settings(side, url)
    try:
        with override_settings(**_session_apps.DJANGO_APP, **engine):
            client = Client()

            def get(path: str) -> tuple[int, str]:
                response = client.get(path)
                return response.status_code, response.content.decode()

            yield _seeded("Django", get)
    finally:
        close()


# -- Flask -------------------------------------------------------------------------------------


@contextlib.contextmanager
def _flask(side: str, url: str) -> Iterator[Batch]:
    app, close = _session_apps.flask_app(side, url)
    client = app.test_client()

    def get(path: str) -> tuple[int, str]:
        response = client.get(path)
        return response.status_code, response.get_data(as_text=True)

    try:
        yield _seeded("Flask", get)
    finally:
        close()


# -- Starlette ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _starlette(side: str, url: str) -> Iterator[Batch]:
    import httpx

    app, closing = _session_apps.starlette_app(side, url)
    # Both sides' cookies are Secure by default: https, as a deployment serves them.
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="https://testserver")

    async def send(n: int, path: str = "/touch") -> list[str]:
        answers = []
        for _ in range(n):
            response = await http.get(path)
            if response.status_code != 200:
                raise RuntimeError(f"Starlette answered {response.status_code}")
            answers.append(response.text)
        return answers

    with asyncio.Runner() as runner:
        try:
            runner.run(http.get("/seed"))
            _checked(runner.run(send(WARMUP)), 1)
            yield lambda n, path: runner.run(send(n, path))
        finally:
            runner.run(http.aclose())
            runner.run(closing())


IN_PROCESS: dict[str, Side] = {"Django": _django, "Flask": _flask, "Starlette": _starlette}
