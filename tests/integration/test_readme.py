"""The README's examples, run as they stand: every ```python block, on the
embedded server (``webtier.open()``, its data in a folder of the test's own),
a server and a Cluster of the suite's own, a Starlette app and a Flask app;
then a request through each app's middleware stack. And the README's
command table and environment variables, against the ``webtier`` command.

A block that opens its own tier is a whole program: it runs as if copied
into a file (the row cache's makes its own SQLite table). The others are
fragments of an application: the names they take for granted and the
addresses they name are those of :mod:`tests.helpers.examples` (which runs
docs/ too). Warnings are errors (pytest's setting), so an example that uses
a deprecated name fails too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import httpx
import pytest
from starlette.applications import Starlette

import webtier
from tests.helpers.examples import ROOT, addresses, examples, given, in_place, run
from webtier.cli import main as webtier_command
from webtier.embedded.status import server_status
from webtier.testing import RedisCluster, RedisServer

README = ROOT / "README.md"
BLOCKS = examples(README)


@pytest.fixture
def embedded_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The examples run in a folder of the test's own (the README's
    ``shop.db`` is made there), the embedded server's data in it too."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    data_dir = tmp_path / "xdg" / "webtier" / "redis"
    yield data_dir
    assert not server_status(data_dir).running, "an example left the embedded server running"


def test_every_readme_example_runs(
    fresh_server: RedisServer, cluster: RedisCluster, embedded_data: Path
) -> None:
    assert len(BLOCKS) >= 8, "the README's examples were not found"
    assert not [str(b) for b in BLOCKS if b.not_run], "every README example runs"
    replaced = addresses(fresh_server, cluster)
    rendered = []
    handlers: dict[str, Any] = {}
    with given(fresh_server) as names:
        names["render"] = lambda: rendered.append(True)
        async_tier, app, flask_app = names["async_tier"], names["app"], names["flask_app"]
        for block in BLOCKS:
            namespace = dict(names)  # each block on its own: the first rebinds `tier`
            run(dataclasses.replace(block, source=in_place(block.source, replaced)), namespace)
            handlers |= {k: v for k, v in namespace.items() if inspect.iscoroutinefunction(v)}
            made = namespace.get("tier")
            if isinstance(made, webtier.WebTier) and made is not names["tier"]:
                webtier.disconnect(made.client)
        assert rendered == [True]

        # Each app with every middleware the examples installed answers a request.
        app.add_route("/cart", handlers["add_to_cart"], methods=["POST"])
        answer = asyncio.run(_post(app, "/cart", async_tier.client))
        assert answer.status_code == 200, answer.text
        assert answer.text == "added"
        assert "webtier_session" in answer.headers["set-cookie"]
        flask_app.add_url_rule("/", "home", lambda: "home")
        answer = flask_app.test_client().get("/")
        assert answer.status_code == 200
        assert answer.text == "home"
        assert names["tier"].sessions.of_user("ann"), "the example's login left no session"
        assert (embedded_data / "dump.rdb").exists(), "no example used the embedded server"


async def _post(app: Starlette, path: str, async_client: Any) -> httpx.Response:
    """One request through the app, in the loop its asyncio tier then closes in."""
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://shop.test") as browser:
            return await browser.post(path)
    finally:
        await async_client.aclose()


def _commands(group: click.Group, ctx: click.Context) -> Iterator[tuple[str, ...]]:
    """Every command of ``group``, as the words that name it."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        load = getattr(command, "load", None)  # a lazy command (bench): the real one
        command = load() if load is not None else command
        if isinstance(command, click.Group):
            for words in _commands(command, ctx):
                yield (name, *words)
        else:
            yield (name,)


def test_the_command_table_names_every_command_in_one_table() -> None:
    text = README.read_text()
    section = text[text.index("### The command line") : text.index("## What it guarantees")]
    lines = section.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("| command"))
    table = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        table.append(line)
    # One table: every row of a command is in it (a blank line would split it).
    assert [line for line in lines if line.startswith("| `webtier")] == table[2:]
    with click.Context(webtier_command) as ctx:
        commands = list(_commands(webtier_command, ctx))
    assert ("server", "status") in commands
    for words in commands:
        head, last = " ".join(words[:-1]), words[-1]
        rows = [row for row in table if f"`webtier {' '.join(words)}" in row]
        if head:  # a subcommand may be named after its group's first: `rows init` / `schedule`
            rows += [row for row in table if f"`webtier {head} " in row and f"`{last}" in row]
        assert rows, f"webtier {' '.join(words)} is missing from the README's command table"


def test_the_readme_lists_every_environment_variable() -> None:
    text = README.read_text()
    variables = [p.envvar for p in webtier_command.params if isinstance(p.envvar, str)]
    assert "WEBTIER_DATABASE_URL" in variables
    for variable in variables:
        assert f"| `{variable}` |" in text, f"{variable} is not in the README's table"
