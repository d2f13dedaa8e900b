"""The apps of ``webtier bench sessions --frameworks``, one per framework and
side (``webtier``: webtier's adapter; ``anchor``: the Redis sessions the
framework's users have today), built alike for the in-process test clients
and for the real servers of ``--served`` (:mod:`benchmarks._session_served`).

Every app has the same routes: ``/seed`` puts :data:`SEEDED` keys in the
session, ``/touch`` reads it and changes one key (a counter, which it
answers), ``/read`` reads it and changes nothing, ``/plain`` touches no
session (the framework alone).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio

from benchmarks import _django_session_urls
from webtier.config import Config
from webtier.connect import connect, connect_async

SEEDED = _django_session_urls.SEEDED
SIDES = ("webtier", "anchor")


def django_settings(side: str, url: str) -> tuple[dict[str, Any], Callable[[], object]]:
    """The settings that put one side's sessions under Django, and what
    closes its client."""
    if side == "webtier":
        from webtier.sync import WebTier

        client = connect(url)
        tier = WebTier(client, Config())
        engine: dict[str, Any] = {"SESSION_ENGINE": "webtier.web.sessions.django"}
        engine["WEBTIER_SESSIONS"] = {"tier": tier}
        return engine, client.close
    from django.core.cache import caches

    cache = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": url}}
    engine = {"SESSION_ENGINE": "django.contrib.sessions.backends.cache", "CACHES": cache}
    return engine, caches.close_all


DJANGO_BASE = {
    "DEBUG": False,
    "SECRET_KEY": "only-for-this-benchmark",
    "ALLOWED_HOSTS": ["*"],
    "INSTALLED_APPS": [],
    "DATABASES": {},
    "USE_TZ": True,
}
DJANGO_APP = {
    "ROOT_URLCONF": "benchmarks._django_session_urls",
    "MIDDLEWARE": ["django.contrib.sessions.middleware.SessionMiddleware"],
}


def flask_app(side: str, url: str) -> tuple[Any, Callable[[], object]]:
    """One side's Flask app, and what closes its client."""
    import flask

    app = flask.Flask(__name__)
    if side == "webtier":
        from webtier.sync import WebTier
        from webtier.web.sessions.flask import SessionInterface

        client: Any = connect(url)
        app.session_interface = SessionInterface(WebTier(client, Config()))
    else:
        from flask_session import Session

        client = redis.Redis.from_url(url)
        app.config.update(SESSION_TYPE="redis", SESSION_REDIS=client)
        Session(app)

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

    @app.get("/read")
    def read() -> str:
        return str(flask.session.get("n", 0))

    @app.get("/plain")
    def plain() -> str:
        return "plain"

    return app, client.close


def starlette_app(side: str, url: str) -> tuple[Any, Callable[[], Any]]:
    """One side's Starlette app, and what closes its client (a coroutine)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starsessions import load_session

    load = side == "anchor"  # starsessions loads a session when asked

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

    async def read(request: Request) -> PlainTextResponse:
        if load:
            await load_session(request)
        return PlainTextResponse(str(request.session.get("n", 0)))

    async def plain(request: Request) -> PlainTextResponse:
        return PlainTextResponse("plain")

    routes = [Route("/seed", seed), Route("/touch", touch), Route("/read", read)]
    routes.append(Route("/plain", plain))
    app: Any = Starlette(routes=routes)
    if side == "webtier":
        from webtier.aio import WebTier as AsyncWebTier
        from webtier.web import sessions

        client: Any = connect_async(url)
        tier = AsyncWebTier(client, Config())
        app.add_middleware(sessions.ASGIMiddleware, tier=tier, scope_session=True)
    else:
        from starsessions import SessionMiddleware
        from starsessions.stores.redis import RedisStore

        client = redis.asyncio.Redis.from_url(url)
        app.add_middleware(SessionMiddleware, store=RedisStore(connection=client))
    return app, client.aclose


# -- the real servers' entry points (``--served``) ------------------------------------------
# The bench starts each server with the framework, the side and the Redis URL
# in its environment: the one place a bench process reads it.

FRAMEWORK_ENV = "WEBTIER_BENCH_FRAMEWORK"
SIDE_ENV = "WEBTIER_BENCH_SIDE"
URL_ENV = "WEBTIER_BENCH_URL"


def wsgi() -> Any:
    """gunicorn's app (``benchmarks._session_apps:wsgi()``): Django or Flask."""
    framework, side, url = (os.environ[name] for name in (FRAMEWORK_ENV, SIDE_ENV, URL_ENV))
    if framework == "Flask":
        app, _ = flask_app(side, url)
        return app
    import django
    from django.conf import settings
    from django.core.wsgi import get_wsgi_application

    engine, _ = django_settings(side, url)
    settings.configure(**DJANGO_BASE, **DJANGO_APP, **engine)
    django.setup()
    return get_wsgi_application()


def asgi() -> Any:
    """uvicorn's app (``--factory benchmarks._session_apps:asgi``): Starlette."""
    app, _ = starlette_app(os.environ[SIDE_ENV], os.environ[URL_ENV])
    return app
