"""The README's examples, run as they stand: every ```python block, on a
server and a Cluster of the suite's own, a real SQLite shop, a Starlette app
and a Flask app; then a request through each app's middleware stack.

A block is a fragment of an application: the names it takes for granted
(``tier``, ``async_tier``, ``app``, ``flask_app``, ``render``, ``KEY``) are
given here, and the addresses it names are those of the suite's servers.
Warnings are errors (pytest's setting), so an example that uses a
deprecated name fails too.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import flask
import httpx
import pytest
from starlette.applications import Starlette

import webtier
from webtier.testing import RedisCluster, RedisServer

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    # A server of its own: the examples write under the default prefix.
    running = RedisServer.start()
    yield running
    running.stop()


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's ``sqlite:///shop.db``, in a folder of the test's own."""
    monkeypatch.chdir(tmp_path)
    with sqlite3.connect(tmp_path / "shop.db") as db:
        db.execute("CREATE TABLE inventory (item_id INTEGER PRIMARY KEY, name TEXT, stock INT)")
        db.execute("INSERT INTO inventory VALUES (42, 'teapot', 3)")


def _run(number: int, source: str, namespace: dict[str, Any]) -> None:
    code = compile(
        source, f"README.md, example {number}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )

    async def run() -> None:
        result = eval(code, namespace)  # the README's own examples
        if inspect.iscoroutine(result):
            await result
        made = namespace.get("tier")
        if isinstance(made, webtier.AsyncWebTier):  # an example's own asyncio client
            await made.client.aclose()

    asyncio.run(run())


def test_every_readme_example_runs(server: RedisServer, cluster: RedisCluster, shop: None) -> None:
    assert len(BLOCKS) >= 8, "the README's examples were not found"
    client = webtier.connect(server.url)
    async_client = webtier.connect_async(server.url)
    app, flask_app = Starlette(), flask.Flask("readme")
    rendered = []
    given = {
        "webtier": webtier,  # imported by the first example
        "tier": webtier.WebTier(client),
        "async_tier": webtier.AsyncWebTier(async_client),
        "app": app,
        "flask_app": flask_app,
        "render": lambda: rendered.append(True),
        "KEY": secrets.token_bytes(32),
    }
    addresses = {
        "redis://localhost:6379/0": server.url,
        "redis+cluster://10.0.0.1:7000,10.0.0.2:7000": cluster.url,
    }
    handlers: dict[str, Any] = {}
    try:
        for number, block in enumerate(BLOCKS, 1):
            for written, actual in addresses.items():
                block = block.replace(written, actual)
            namespace = dict(given)
            _run(number, block, namespace)
            handlers |= {k: v for k, v in namespace.items() if inspect.iscoroutinefunction(v)}
            made = namespace.get("tier")
            if isinstance(made, webtier.WebTier) and made is not given["tier"]:
                webtier.disconnect(made.client)
        assert rendered == [True]

        # Each app with every middleware the examples installed answers a request.
        app.add_route("/cart", handlers["add_to_cart"], methods=["POST"])
        answer = asyncio.run(_post(app, "/cart", async_client))
        assert answer.status_code == 200, answer.text
        assert answer.text == "added"
        assert "webtier_session" in answer.headers["set-cookie"]
        flask_app.add_url_rule("/", "home", lambda: "home")
        answer = flask_app.test_client().get("/")
        assert answer.status_code == 200
        assert answer.text == "home"
        assert given["tier"].sessions.of_user("ann"), "the example's login left no session"
    finally:
        webtier.disconnect(client)


async def _post(app: Starlette, path: str, async_client: Any) -> httpx.Response:
    """One request through the app, in the loop its asyncio tier then closes in."""
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://shop.test") as browser:
            return await browser.post(path)
    finally:
        await async_client.aclose()
