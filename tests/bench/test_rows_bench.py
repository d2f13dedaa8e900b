"""The row cache benchmark runs end to end on real servers (tiny sizes).

It checks that every row is reported and that the bench cleans up after
itself; it never looks at a timing.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from benchmarks.cli import bench
from webtier.testing import RedisServer

pytestmark = pytest.mark.needs_redis

ROWS = {
    "refresh, 100 due, SQLite",
    "refresh, 100 due, PostgreSQL",
    "read, cached row vs SQLite SELECT (prepared once)",
    "read, cached row vs SQLite SELECT (built per call)",
    "read, cached row vs PostgreSQL SELECT (prepared once)",
    "read, cached row vs PostgreSQL SELECT (built per call)",
}
# Databases of the session's server that no other test uses (the counters
# bench smoke test takes 14 and 15).
DB = 12


def test_rowcache_bench_reports_every_row(
    servers: dict[str, RedisServer], postgres_url: str, tmp_path: Path
) -> None:
    server = servers["standalone"]
    schema = f"b{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_url, poolclass=sa.NullPool)
    with admin.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    in_schema = sa.make_url(postgres_url).update_query_dict({"options": f"-csearch_path={schema}"})
    out = tmp_path / "rowcache.json"
    args = ["rowcache", "--url", f"redis://127.0.0.1:{server.port}/{DB}"]
    args += ["--postgres", in_schema.render_as_string(hide_password=False)]
    args += ["--seconds", "0.2", "--repeat", "1", "--scale", "0.01", "--json", str(out)]
    try:
        result = CliRunner().invoke(bench, [*args, "--markdown"])
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()

    assert result.exit_code == 0, result.output
    for row in ROWS:
        assert f"| {row} |" in result.stdout
    saved = json.loads(out.read_text())
    assert {row["what"] for row in saved["rows"]} == ROWS
    for db in (DB, DB + 1):  # flushed on the way out
        client = server.client(db=db)
        try:
            assert client.dbsize() == 0
        finally:
            client.close()
