"""The Cluster benchmark runs end to end (tiny runs): every operation and the
mix on one server and on a 3-master Cluster of its own, with verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmarks import _cluster_workloads
from benchmarks.cli import bench
from webtier.testing import RedisServer

pytestmark = pytest.mark.needs_redis

DB = 4  # with 5: used by no other test


def test_cluster_bench_reports_every_operation_with_shares_and_verdicts(
    servers: dict[str, RedisServer], tmp_path: Path
) -> None:
    server = servers["standalone"]
    out = tmp_path / "cluster.json"
    url = f"redis://127.0.0.1:{server.port}/{DB}"
    args = ["cluster", "--url", url, "--seconds", "0.1", "--repeat", "1", "--processes", "1"]

    result = CliRunner().invoke(bench, [*args, "--json", str(out), "--markdown"])

    assert result.exit_code == 0, result.output
    (table,) = json.loads(out.read_text())["tables"]
    records = {record["operation"]: record for record in table["records"]}
    assert set(records) == set(_cluster_workloads.WORKLOADS)
    for operation, record in records.items():
        assert f"| {operation} | 1 |" in result.stdout
        for figure in ("ops_per_s", "cpu_us_per_op"):
            assert record[f"single_{figure}"] > 0
            assert record[f"cluster_{figure}"] > 0
        assert len(record["master_shares"]) == 3
        assert sum(record["master_shares"]) == pytest.approx(1.0)
        assert {type(record["share_met"]), type(record["cpu_met"])} == {bool}
    for number in (DB, DB + 1):
        client = server.client(db=number)
        try:
            assert client.dbsize() == 0
        finally:
            client.close()
