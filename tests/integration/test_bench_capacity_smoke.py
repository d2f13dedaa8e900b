"""The capacity benchmark runs end to end (tiny sizes): every input of the
capacity model measured, and the check of the model against a small shop."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmarks.cli import bench
from webtier import capacity
from webtier.testing import RedisServer

pytestmark = [pytest.mark.needs_redis, pytest.mark.slow]  # ~10 s on an idle 2-core machine

DB = 2  # with 3: used by no other test


def test_capacity_bench_measures_every_input_and_checks_the_model(
    servers: dict[str, RedisServer], tmp_path: Path
) -> None:
    server = servers["standalone"]
    out = tmp_path / "capacity.json"
    url = f"redis://127.0.0.1:{server.port}/{DB}"
    args = ["capacity", "--url", url, "--seconds", "0.1", "--repeat", "1", "--processes", "1"]

    result = CliRunner().invoke(bench, [*args, "--scale", "0.02", "--check", "--json", str(out)])

    assert result.exit_code == 0, result.output
    inputs, check = json.loads(out.read_text())["tables"]
    (measured,) = inputs["records"]
    # What the bench measures is what the model takes: the costs could be built from it.
    wanted = {f.name for f in dataclasses.fields(capacity.Costs)}
    wanted -= {"source", "sessions_cleaned_per_s", "counters_cleaned_per_s", "rows_refreshed_per_s"}
    assert wanted <= set(measured)
    for table in ("cpu_us", "bytes_in", "bytes_out"):
        assert set(measured[table]) == set(capacity.OPERATIONS)
        assert all(value > 0 for value in measured[table].values())
    quantities = {record["quantity"] for record in check["records"]}
    assert "memory: the whole shop" in quantities
    assert "server CPU per page request" in quantities
    for record in check["records"]:
        assert record["predicted"] > 0
        assert record["measured"] > 0
    for number in (DB, DB + 1):
        client = server.client(db=number)
        try:
            assert client.dbsize() == 0
        finally:
            client.close()
