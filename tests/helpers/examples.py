"""The python blocks of a Markdown page, run as its reader would run them:
in order, each page in a namespace of its own that its blocks share, on the
suite's servers; then a request through every app the page made.

A block is a whole program (it opens its own tier, makes its own app) or a
fragment of an application: the names a page takes for granted (``tier``,
``async_tier``, ``app``, ``flask_app``, ``wsgi_app``, ``render``, ``KEY``)
are given by :func:`given`, and the addresses it names (``ADDRESSES``) are
replaced by those of the suite's servers. A block that cannot run (a piece
of webtier's own source, quoted) says so on the line before its fence::

    <!-- not run: why -->

and is only checked to compile.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import re
import secrets
import sqlite3
import sys
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import flask
import httpx
import prometheus_client
import werkzeug.test
from starlette.applications import Starlette
from starlette.routing import Mount, Route

import webtier
from tests.helpers.web import asgi_lifespan
from webtier.metrics import Collector
from webtier.testing import RedisCluster, RedisServer

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```python[ \t]*\n(?P<body>.*?)^(?P=indent)```", re.MULTILINE | re.DOTALL
)
_NOT_RUN = re.compile(r"<!-- not run: (?P<why>.+?) -->[ \t]*$")

# The addresses the pages name, and the servers of the suite they stand for.
_SERVER, _CLUSTER, _DATABASE = (
    "redis://localhost:6379/0",
    "redis+cluster://10.0.0.1:7000,10.0.0.2:7000",
    "postgresql+psycopg://shop@db/shop",
)


@dataclass(frozen=True)
class Example:
    page: str  # relative to the repository: "docs/rows.md"
    line: int  # the fence's line
    source: str
    not_run: str | None  # why, when the page marks the block as not runnable

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def examples(page: Path) -> list[Example]:
    """The ```python blocks of ``page``, dedented (a block may sit in a list)."""
    text = page.read_text()
    found = []
    for fence in _FENCE.finditer(text):
        before = text[: fence.start()].rstrip("\n").rpartition("\n")[2]
        marked = _NOT_RUN.search(before)
        found.append(
            Example(
                str(page.relative_to(ROOT)),
                text.count("\n", 0, fence.start()) + 1,
                textwrap.dedent(fence["body"]),
                marked["why"] if marked else None,
            )
        )
    return found


def run(example: Example, namespace: dict[str, Any]) -> None:
    """Runs ``example`` in ``namespace`` as a file runs (``asyncio.run``
    included); a block with a top-level ``await`` runs in a loop of its own.
    Tracebacks name the page and its line."""
    source = "\n" * example.line + example.source  # line numbers as in the page
    code = compile(source, example.page, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if example.not_run is not None:
        return
    if not code.co_flags & inspect.CO_COROUTINE:
        exec(code, namespace)  # the page's own example
        return

    async def run() -> None:
        result = eval(code, namespace)  # the page's own example
        if inspect.iscoroutine(result):
            await result
        made = namespace.get("tier")
        if isinstance(made, webtier.AsyncWebTier):  # an example's own asyncio client
            await made.client.aclose()

    asyncio.run(run())


def addresses(server: RedisServer, cluster: RedisCluster) -> dict[str, str]:
    return {_SERVER: server.url, _CLUSTER: cluster.url, _DATABASE: "sqlite:///shop.db"}


def in_place(source: str, replaced: dict[str, str]) -> str:
    for written, actual in replaced.items():
        source = source.replace(written, actual)
    return source


def stock_shop_db() -> None:
    """The reader's own ``inventory`` table, in ``shop.db`` of the current
    folder: the database a page's examples name (yours exists already)."""
    db = sqlite3.connect("shop.db")
    with db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS inventory"
            " (item_id INTEGER PRIMARY KEY, name TEXT, price REAL, stock INT)"
        )
        db.executemany(
            "INSERT OR REPLACE INTO inventory VALUES (?, ?, ?, ?)",
            [(i, f"item {i}", 9.5, 3) for i in (1, 2, 3, 42)],
        )
    db.close()


@contextlib.contextmanager
def given(server: RedisServer) -> Iterator[dict[str, Any]]:
    """The names the pages take for granted, on ``server`` (and the module
    Django's settings name, ``myshop.redis``, holding ``tier``). The asyncio
    client is closed by :func:`answer_every_route` (or the caller), in the loop that used it;
    collectors a page registered with prometheus_client are unregistered."""
    client = webtier.connect(server.url)
    tier = webtier.WebTier(client)
    myshop = types.ModuleType("myshop.redis")
    myshop.tier = tier  # type: ignore[attr-defined]
    sys.modules["myshop.redis"] = myshop
    try:
        yield {
            "__name__": "__main__",
            "tier": tier,
            "async_tier": webtier.AsyncWebTier(webtier.connect_async(server.url)),
            "app": Starlette(),
            "flask_app": flask.Flask("examples"),
            "wsgi_app": flask.Flask("wsgi"),
            "render": lambda: None,
            "KEY": secrets.token_bytes(32),
        }
    finally:
        for collector in list(prometheus_client.REGISTRY._collector_to_names):
            if isinstance(collector, Collector):
                prometheus_client.REGISTRY.unregister(collector)
        del sys.modules["myshop.redis"]
        webtier.disconnect(client)


def apps(namespace: dict[str, Any]) -> dict[int, Any]:
    """Every web app in ``namespace``, by id: ASGI (Starlette, FastAPI),
    Flask, webtier's WSGI middlewares, and a Django project (``urlpatterns`` and the
    settings ``MIDDLEWARE``, ``WEBTIER_SESSIONS``) as the namespace itself."""
    found = {}
    for value in namespace.values():
        if isinstance(value, (Starlette, flask.Flask)) or _is_wsgi_middleware(value):
            found[id(value)] = value
    if "urlpatterns" in namespace:
        found[id(namespace)] = dict(namespace)
    return found


def async_tiers(namespace: dict[str, Any]) -> dict[int, webtier.AsyncWebTier]:
    """The asyncio tiers in ``namespace`` (the given one and a page's own), by id."""
    return {id(v): v for v in namespace.values() if isinstance(v, webtier.AsyncWebTier)}


def _is_wsgi_middleware(value: Any) -> bool:
    kind = type(value)
    return kind.__name__ == "WSGIMiddleware" and kind.__module__.startswith("webtier.")


def _filled(path: str) -> str:
    """A path template with a value in every parameter ("42" suits str and int)."""
    return re.sub(r"\{[^}]+\}|<[^>]+>", "42", path)


def _method(methods: Any) -> str:
    return "POST" if "POST" in (methods or ()) else "GET"


def _requests(app: Any) -> list[tuple[str, str]]:
    """One request per route of ``app``: its path with every parameter
    filled, POST if the route takes it; "/" for an app with no route (its
    middleware stack still answers)."""
    if isinstance(app, Starlette):
        requests = [
            (_method(r.methods), _filled(r.path))
            if isinstance(r, Route)
            else ("GET", _filled(r.path) + "/")
            for r in app.routes
            if isinstance(r, (Route, Mount))
        ]
    elif isinstance(app, flask.Flask):
        rules = [r for r in app.url_map.iter_rules() if r.endpoint != "static"]
        requests = [(_method(r.methods), _filled(r.rule)) for r in rules]
    elif isinstance(app, dict):
        requests = [("POST", "/" + _filled(str(p.pattern))) for p in app["urlpatterns"]]
    else:
        requests = []
    return requests or [("GET", NO_ROUTE)]


NO_ROUTE = "/no-route"  # what an app with no route is asked: its middleware stack answers 404
FORM = {"count": "2"}  # what a page's POST handlers read


def answer_every_route(
    made: dict[int, Any], tiers: dict[int, webtier.AsyncWebTier]
) -> dict[str, int]:
    """Sends one request to every route of every app in ``made`` (the form
    :data:`FORM` with each POST) and returns the status of each, by
    "METHOD path"; then closes the clients of ``tiers``, in the loop that
    served the ASGI apps (their lifespan run around the requests)."""
    statuses = {}
    for app in made.values():
        if isinstance(app, Starlette):
            continue
        for method, path in _requests(app):
            statuses[_said(app, method, path)] = _wsgi_status(app, method, path)
    asgi = [app for app in made.values() if isinstance(app, Starlette)]
    statuses |= asyncio.run(_asgi_statuses(asgi, list(tiers.values())))
    return statuses


def _said(app: Any, method: str, path: str) -> str:
    return f"{method} {path} ({type(app).__name__})"


def _wsgi_status(app: Any, method: str, path: str) -> int:
    if isinstance(app, dict):  # a Django project: its settings and urls from the page
        from django.test import Client, override_settings

        import tests.helpers.django_shop  # noqa: F401  (configures Django)

        urls = types.ModuleType("page_urls")
        urls.urlpatterns = app["urlpatterns"]  # type: ignore[attr-defined]
        sys.modules["page_urls"] = urls
        middleware = [m for m in app["MIDDLEWARE"] if m is not ...]  # the reader's others
        engine = {"SESSION_ENGINE": app["SESSION_ENGINE"]} if "SESSION_ENGINE" in app else {}
        try:
            with override_settings(
                ROOT_URLCONF="page_urls",
                MIDDLEWARE=middleware,
                WEBTIER_SESSIONS=app["WEBTIER_SESSIONS"],
                **engine,
            ):
                return (
                    Client()
                    .generic(method, path, urlencode(FORM), "application/x-www-form-urlencoded")
                    .status_code
                )
        finally:
            del sys.modules["page_urls"]
    client = app.test_client() if isinstance(app, flask.Flask) else werkzeug.test.Client(app)
    return client.open(path, method=method, data=FORM).status_code


async def _asgi_statuses(
    apps: list[Starlette], tiers: list[webtier.AsyncWebTier]
) -> dict[str, int]:
    statuses = {}
    try:
        for app in apps:
            async with asgi_lifespan(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
                    for method, path in _requests(app):
                        answer = await c.request(
                            method, path, data=FORM if method == "POST" else None
                        )
                        statuses[_said(app, method, path)] = answer.status_code
    finally:
        for tier in tiers:
            await tier.client.aclose()
    return statuses
