"""The capacity benchmark runs end to end (tiny sizes): every input of the
capacity model measured, and the check of the model against a small shop."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import run_bench_cli
from tests.helpers.servers import BINARIES
from webtier import capacity
from webtier.testing import RedisServer

pytestmark = pytest.mark.needs_redis

DB = 2  # with 3
NOT_MEASURED = {
    "source",
    "sessions_cleaned_per_s",
    "counters_cleaned_per_s",
    "rows_refreshed_per_s",
}


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A server no other test's clients hold memory on: at this scale a data
    set is a few kilobytes, and the shared server's used_memory moved by more
    than that while clients of earlier tests were freed (a negative growth)."""
    server = RedisServer.start(BINARIES["standalone"])
    yield server
    server.stop()


def test_capacity_bench_measures_every_input_and_checks_the_model(
    own_server: RedisServer, tmp_path: Path
) -> None:
    args = ("--seconds", "0.1", "--processes", "1", "--scale", "0.02", "--check")

    _, saved = run_bench_cli(own_server, DB, tmp_path, "capacity", *args)

    inputs, check = saved["tables"]
    (measured,) = inputs["records"]
    # What the bench measures is what the model takes.
    assert {f.name for f in dataclasses.fields(capacity.Costs)} - NOT_MEASURED <= set(measured)
    for table in ("cpu_us", "bytes_in", "bytes_out"):
        assert set(measured[table]) == set(capacity.OPERATIONS)
        assert all(value > 0 for value in measured[table].values())
    quantities = {record["quantity"] for record in check["records"]}
    assert {"memory: the whole shop", "server CPU per page request"} <= quantities
    for record in check["records"]:
        assert record["predicted"] > 0
        assert record["measured"] > 0
