"""The Cluster benchmark runs end to end (tiny runs): every operation and the
mix on one server and on a 3-master Cluster of its own, with verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import _cluster_workloads
from tests.helpers.cli import run_bench_cli
from webtier.testing import RedisServer

pytestmark = pytest.mark.needs_redis

DB = 4  # with 5: used by no other test


def test_cluster_bench_reports_every_operation_with_shares_and_verdicts(
    servers: dict[str, RedisServer], tmp_path: Path
) -> None:
    args = ("--seconds", "0.1", "--processes", "1")

    result, saved = run_bench_cli(servers["standalone"], DB, tmp_path, "cluster", *args)

    (table,) = saved["tables"]
    records = {record["operation"]: record for record in table["records"]}
    assert set(records) == set(_cluster_workloads.WORKLOADS)
    for operation, record in records.items():
        assert f"| {operation} | 1 |" in result.stdout
        for figure in ("ops_per_s", "cpu_us_per_op", "command_us_per_op"):
            assert record[f"single_{figure}"] > 0
            assert record[f"cluster_{figure}"] > 0
        assert len(record["master_shares"]) == 3
        assert sum(record["master_shares"]) == pytest.approx(1.0)
        assert {type(record["share_met"]), type(record["cpu_met"])} == {bool}
