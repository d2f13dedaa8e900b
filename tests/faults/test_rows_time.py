"""The row cache never goes back in time: not across a Redis restart (with
its AOF, or empty), not across a PostgreSQL restart.

A writer updates the row in PostgreSQL and then invalidates it; readers
(sync and asyncio) read it through and a worker refreshes it every 50 ms,
all the while: no read may return a version older than the last
invalidation that returned before the read began (the ``Rows`` workload of
the matrix, on PostgreSQL)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import webtier
from tests.faults.drivers import HOLD, Fault, Kill9, Target
from tests.faults.figures import Figures
from tests.faults.runner import run
from tests.faults.servers import DURABLE, start_server
from tests.faults.workloads import Rows
from tests.helpers.rows import Instrumented, seed, set_stock
from webtier.config import Config
from webtier.testing.pgserver import PostgresServer

pytestmark = [pytest.mark.faults, pytest.mark.slow]  # loads under faults: CI, not the quick run


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with PostgresServer.start() as server:
        yield server


def in_schema(pg: PostgresServer) -> sa.Engine:
    """An engine on a schema of its own in ``pg``."""
    schema = f"s{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(pg.url, poolclass=sa.NullPool)
    with admin.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    admin.dispose()
    return sa.create_engine(
        sa.make_url(pg.url).update_query_dict({"options": f"-csearch_path={schema}"})
    )


def on_postgres(pg: PostgresServer) -> type[Rows]:
    class PgRows(Rows):
        def make_engine(self) -> sa.Engine:
            return in_schema(pg)

    return PgRows


class PgRestart(Fault):
    """PostgreSQL stopped at once (its immediate shutdown: clients cut off),
    then started again on the same data."""

    name = "postgres-restart"

    def __init__(self, pg: PostgresServer) -> None:
        self.pg = pg

    def strike(self, target: Target) -> tuple[float, float]:
        began = time.monotonic()
        self.pg.kill()
        time.sleep(HOLD)
        self.pg.launch()  # returns once it accepts connections
        return began, time.monotonic()


class EmptyRestart(Kill9):
    """kill -9 of a server that keeps nothing: it comes back empty (tickets,
    schedule and copies gone)."""

    name = "restart-empty"


@pytest.mark.parametrize("fault", ["kill-9+restart", "restart-empty", "postgres-restart"])
def test_a_cached_row_never_goes_back_in_time(
    fault: str, pg: PostgresServer, tmp_path: Path, figures: Figures
) -> None:
    chosen = {
        "kill-9+restart": Kill9(),
        "restart-empty": EmptyRestart(),
        "postgres-restart": PgRestart(pg),
    }
    durable = DURABLE if fault != "restart-empty" else ()
    with start_server(*durable) as server:
        run([on_postgres(pg)], chosen[fault], Target(server.url, server), tmp_path, figures)


def test_a_load_from_before_an_empty_restart_never_stores_over_a_newer_one(
    pg: PostgresServer,
) -> None:
    # A load takes its ticket and reads v1; Redis restarts empty; v2 is
    # written and invalidated; a second load takes a ticket and reads v2;
    # the first load stores now. Were tickets counted from 1 again after
    # the restart, both would hold the same ticket and v1 would be stored
    # over the invalidation of v2.
    engine = in_schema(pg)
    inner = seed(engine, 5)
    set_stock(engine, 1, 1)
    first, second = Instrumented(inner, gated=True), Instrumented(inner, gated=True)
    with start_server() as server:
        client = webtier.connect(server.url)
        tier = webtier.WebTier(client, Config(prefix="tickets"))
        got: dict[str, Any] = {}

        def read(name: str, source: Instrumented) -> None:
            got[name] = tier.rows.get(source, 1, load=True)

        one = threading.Thread(target=read, args=("first", first))
        one.start()
        assert first.read.wait(10)  # ticket taken, v1 read
        server.kill()
        server.launch()  # empty
        set_stock(engine, 1, 2)
        tier.rows.invalidate(inner, 1)
        two = threading.Thread(target=read, args=("second", second))
        two.start()
        assert second.read.wait(10)  # a ticket of the restarted server, v2 read
        first.gate.set()
        one.join(10)
        second.gate.set()
        two.join(10)
        assert (got["first"]["stock"], got["second"]["stock"]) == (1, 2)
        copy = tier.rows.get(inner, 1)
        assert copy is None or copy["stock"] == 2
        webtier.disconnect(client)
    engine.dispose()
