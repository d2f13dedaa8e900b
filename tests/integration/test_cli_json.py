"""``--json`` on every read command: one document, valid against the JSON
Schema shipped in ``webtier/cli/schemas``; and every schema has its command."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import click
import jsonschema
import pytest
import sqlalchemy as sa

import webtier
from tests.helpers.cli import webtier_cli
from tests.helpers.servers import wait_for
from tests.helpers.shop import serving, stocked
from webtier.cli import main
from webtier.cli.output import schema
from webtier.embedded import EmbeddedRedis
from webtier.workers import Worker

pytestmark = pytest.mark.onlynoncluster  # output, not routing: one server suffices


def json_commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[str]:
    """``group-command`` for every command below ``group`` with ``--json``."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from json_commands(command, (*path, name))
        elif any(param.name == "as_json" for param in command.params):
            yield "-".join((*path, name))


def leaf_commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[str]:
    """``group-command`` for every command below ``group`` that runs."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from leaf_commands(command, (*path, name))
            if command.invoke_without_command:
                yield "-".join((*path, name))
        else:
            yield "-".join((*path, name))


# The commands that read nothing to print (they change data, serve, or
# drive), and the one read whose output is already a machine format.
NOT_READS = {
    "worker": "runs the jobs",
    "demo": "serves the shop",
    "server": "runs the embedded server",
    "server-stop": "stops it",
    "reset": "deletes",
    "rows-init": "writes the database",
    "rows-schedule": "writes",
    "rows-refresh": "writes",
    "rows-invalidate": "deletes",
    "counters-clean": "deletes",
    "sessions-clean": "deletes",
    "sessions-revoke": "deletes",
    "settings-adopt": "writes",
    "settings-reset": "deletes",
    "dashboard": "serves",
    "metrics": "prints the Prometheus exposition: the machine format already",
    "bench": "runs benchmarks (--json PATH writes its report)",
    "completion": "prints a shell script",
}


def test_every_read_command_takes_json() -> None:
    leaves = set(leaf_commands(main))
    assert set(NOT_READS) <= leaves, "a command listed above is gone"
    assert leaves - set(NOT_READS) == set(json_commands(main))


def shipped_schemas() -> set[str]:
    found = resources.files("webtier.cli").joinpath("schemas").iterdir()
    return {entry.name.removesuffix(".json") for entry in found if entry.name.endswith(".json")}


def test_every_read_command_has_json_and_a_schema() -> None:
    assert set(json_commands(main)) == shipped_schemas()
    assert shipped_schemas() >= {
        "counters-list", "counters-show", "stats-show", "stats-slowest", "ranking-top",
        "ranking-rank", "sessions-stats", "sessions-user", "rows-show", "rows-status", "workers",
        "size",
    }  # fmt: skip
    for name in shipped_schemas():
        jsonschema.Draft202012Validator.check_schema(schema(name))


@pytest.fixture
def shop(redis_url: str, prefix: str, tmp_path: Path) -> Iterator[tuple[str, ...]]:
    """Something to read in every part, and the options that reach it; a
    worker runs meanwhile, so that ``workers`` lists one."""
    edge = ("--url", redis_url, "--prefix", prefix, "--database", f"sqlite:///{tmp_path}/s.db")
    edge += ("--data-dir", str(tmp_path / "data"))  # its embedded server, for server status
    embedded = EmbeddedRedis(tmp_path / "data").start()
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, webtier.Config(prefix=prefix))
    tier.counters.record("views:/", 7)
    for value in (0.1, 0.2, 0.3):
        tier.stats.record("/item/{id}", "AccessTime", value)
    tier.ranking.record_view("item:1")
    tier.sessions.new(user="ann")
    assert webtier_cli(*edge, "rows", "init", "--items", "3").code == 0
    assert webtier_cli(*edge, "rows", "schedule", "--all", "--delay", "60").code == 0
    assert webtier_cli(*edge, "rows", "refresh").code == 0
    worker = Worker(tier, (), heartbeat=0.2)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(tier.workers.alive, "the worker announced itself")
        yield edge
    finally:
        worker.request_stop()
        thread.join(timeout=10)
        webtier.disconnect(client)
        embedded.stop()


READS = {
    "counters-list": ("counters", "list"),
    "counters-show": ("counters", "show", "views:/", "--precision", "60"),
    "stats-show": ("stats", "show", "/item/{id}", "--each", "--periods", "2"),
    "stats-slowest": ("stats", "slowest"),
    "ranking-top": ("ranking", "top"),
    "ranking-rank": ("ranking", "rank", "item:1"),
    "sessions-stats": ("sessions", "stats"),
    "sessions-user": ("sessions", "user", "ann"),
    "rows-show": ("rows", "show", "2"),
    "rows-status": ("rows", "status"),
    "workers": ("workers",),
    "settings-show": ("settings", "show"),
    "server-status": ("server", "status"),
    "size": ("size", "--sessions", "1e9", "--hits-per-day", "10e9"),
}


# Commands with --json that drive something rather than read Redis: each has
# a test of its own below.
DRIVES = {"loadgen"}


@pytest.mark.usefixtures("steady_hour")
def test_each_document_is_valid_against_its_schema(shop: tuple[str, ...]) -> None:
    assert set(READS) | DRIVES == shipped_schemas()
    for name, command in READS.items():
        ran = webtier_cli(*shop, *command, "--json")
        assert ran.code == 0, (name, ran)
        document = json.loads(ran.stdout)  # one document, nothing else on stdout
        jsonschema.validate(document, schema(name))
        assert ran.stdout == json.dumps(document, indent=2) + "\n", name  # one format
        assert document, name


@pytest.mark.usefixtures("steady_hour")
def test_the_figures_carry_their_units(shop: tuple[str, ...]) -> None:
    (summary,) = json.loads(webtier_cli(*shop, "stats", "show", "/item/{id}", "--json").stdout)[
        "summaries"
    ]
    assert summary["count"] == 3
    assert summary["mean_seconds"] == pytest.approx(0.2)
    assert summary["min_seconds"] == pytest.approx(0.1)
    (sample,) = json.loads(webtier_cli(*shop, "counters", "show", "views:/", "--json").stdout)[
        "samples"
    ]
    assert sample["count"] == 7
    (session,) = json.loads(webtier_cli(*shop, "sessions", "user", "ann", "--json").stdout)[
        "sessions"
    ]
    assert session["last_seen_epoch"] >= session["created_epoch"] > 1_700_000_000
    row = json.loads(webtier_cli(*shop, "rows", "show", "2", "--json").stdout)["row"]
    assert row["item_id"] == 2
    assert isinstance(row["price"], str)  # a decimal, exact


def test_a_missing_name_is_a_document_and_exit_status_1(redis_url: str, prefix: str) -> None:
    edge = ("--url", redis_url, "--prefix", prefix)
    ran = webtier_cli(*edge, "ranking", "rank", "nosuch", "--json")
    assert ran.code == 1
    assert json.loads(ran.stdout) == {"item": "nosuch", "place": None}
    assert "not ranked" in ran.stderr
    ran = webtier_cli(*edge, "counters", "show", "nosuch", "--json")
    assert ran.code == 1
    jsonschema.validate(json.loads(ran.stdout), schema("counters-show"))


def test_metrics_prints_the_exposition(shop: tuple[str, ...]) -> None:
    """``webtier metrics`` has no --json: its output is already a machine
    format, the exposition a /metrics endpoint serves."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
    from prometheus_client.parser import text_string_to_metric_families

    ran = webtier_cli(*shop, "metrics")
    assert ran.code == 0, ran
    names = {family.name for family in text_string_to_metric_families(ran.stdout)}
    assert {"webtier_up", "webtier_counts", "webtier_sessions", "webtier_rows_scheduled"} <= names
    ran = webtier_cli(*shop, "metrics", "--openmetrics")
    assert ran.stdout.endswith("# EOF\n")
    assert "webtier_access_time_seconds" in {family.name for family in om(ran.stdout)}


def test_loadgen_prints_one_document(redis_url: str, prefix: str, tmp_path: Path) -> None:
    engine = stocked(sa.create_engine(f"sqlite:///{tmp_path}/shop.db"))
    with serving(redis_url, prefix, engine) as shop:
        ran = webtier_cli(
            "loadgen", shop, "--rate", "20", "--visitors", "30", "--items", "300", "--seed", "1",
            "--json",
        )  # fmt: skip
    assert ran.code == 0, ran
    document = json.loads(ran.stdout)
    jsonschema.validate(document, schema("loadgen"))
    assert document["requests"] > 0
    assert document["statuses"]["5xx"] == 0
    routes = {route["route"] for route in document["routes"]}
    assert {"GET /", "GET /item/{item_id}"} <= routes


def test_server_status_of_a_server_not_running_is_a_document_and_exit_1(tmp_path: Path) -> None:
    ran = webtier_cli("--data-dir", str(tmp_path), "server", "status", "--json")
    assert ran.code == 1
    document = json.loads(ran.stdout)
    jsonschema.validate(document, schema("server-status"))
    assert (document["running"], document["pid"], document["data_dir"]) == (
        False,
        None,
        str(tmp_path.resolve()),
    )
