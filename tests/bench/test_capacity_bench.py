"""The capacity benchmark runs end to end (tiny sizes): every input of the
capacity model measured, and the check of the model against a small shop."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.helpers.cli import run_bench_cli
from webtier import capacity
from webtier.testing import RedisServer

pytestmark = pytest.mark.needs_redis

DB = 2  # with 3: used by no other test
NOT_MEASURED = {
    "source",
    "sessions_cleaned_per_s",
    "counters_cleaned_per_s",
    "rows_refreshed_per_s",
}


def test_capacity_bench_measures_every_input_and_checks_the_model(
    servers: dict[str, RedisServer], tmp_path: Path
) -> None:
    args = ("--seconds", "0.1", "--processes", "1", "--scale", "0.02", "--check")

    _, saved = run_bench_cli(servers["standalone"], DB, tmp_path, "capacity", *args)

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
