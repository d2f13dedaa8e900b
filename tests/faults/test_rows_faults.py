"""The row cache when things break: a stalled or restarted Redis, a
PostgreSQL that goes away. These tests start servers of their own."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import webtier
from tests.helpers.rows import Instrumented, db_row, seed, set_stock
from tests.helpers.servers import stall
from webtier.config import Config, RetryPolicy, RowSettings
from webtier.testing import RedisServer
from webtier.testing.pgserver import PostgresServer
from webtier.workers import JOBS, Worker

pytestmark = pytest.mark.faults


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer.start() as running:
        yield running


def test_a_claim_lost_in_a_stall_holds_its_rows_one_lease_only(
    server: RedisServer, tmp_path: Path
) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    source = seed(engine, 20)
    config = Config(prefix="stall", rows=RowSettings(lease=1.0), retry=RetryPolicy(attempts=1))
    tier = webtier.WebTier(server.client(socket_timeout=0.3), config)
    tier.rows.refresh_due([source])  # loads the scripts: a NOSCRIPT would be no claim
    # and records the source's origin: the stall meets the claims, not that check
    tier.rows.get(source, 1, load=True)
    for item_id in range(1, 21):
        tier.rows.schedule(source, item_id, 60)
    sleeper = stall(server, 1.2)
    with pytest.raises(webtier.OutcomeUnknown):
        tier.rows.refresh_due([source])  # the claims ran after the stall; replies lost
    sleeper.join()
    status = tier.rows.status(source)
    assert (status.due, status.loading) == (0, 20)  # held, by nobody alive
    assert tier.rows.refresh_due([source]).claimed == 0
    time.sleep(1.1)
    report = tier.rows.refresh_due([source])
    assert (report.claimed, report.stored) == (20, 20)  # after one lease, not wedged
    assert tier.rows.get(source, 20) == db_row(engine, 20)
    engine.dispose()


def test_a_redis_restart_between_load_and_store_stores_nothing_stale(
    server: RedisServer, tmp_path: Path
) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    source = Instrumented(seed(engine), gated=True)
    tier = webtier.WebTier(webtier.connect(server.url), Config(prefix="restart"))
    tier.rows.schedule(source, 1, 60)
    reports = []
    refresh = threading.Thread(target=lambda: reports.append(tier.rows.refresh_due([source])))
    refresh.start()
    assert source.read.wait(10)
    server.kill()
    server.launch()  # empty: the schedule and the ticket are gone
    source.gate.set()
    refresh.join(10)
    assert (reports[0].stored, reports[0].fenced) == (0, 1)
    assert tier.rows.get(source, 1) is None
    engine.dispose()


def test_a_database_outage_keeps_copies_and_the_worker_recovers(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    with PostgresServer.start() as pg:
        engine = sa.create_engine(pg.url)
        source = seed(engine, 30)
        config = Config(prefix="pgdown", rows=RowSettings(sources=(source,), poll=0.02))
        tier = webtier.WebTier(webtier.connect(server.url), config)
        for item_id in range(1, 31):
            tier.rows.schedule(source, item_id, 0.2)
        worker = Worker(tier, [JOBS["rows"]], heartbeat=0.5)
        caplog.set_level(logging.INFO, logger="webtier.worker")
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            deadline = time.monotonic() + 20
            while tier.rows.get(source, 30) is None:
                assert time.monotonic() < deadline, "rows were never cached"
                time.sleep(0.05)
            before = {i: tier.rows.get(source, i) for i in range(1, 31)}
            pg.kill()
            time.sleep(2.0)
            failing = [r for r in caplog.records if "failed (" in r.getMessage()]
            assert len(failing) == 1, "an outage is logged once, not per retry"
            assert "inventory" in failing[0].getMessage()
            # Reads are served from the copies the whole time.
            assert {i: tier.rows.get(source, i) for i in range(1, 31)} == before
            pg.launch()
            set_stock(engine, 12, 12_345)
            deadline = time.monotonic() + 30
            while (tier.rows.get(source, 12) or {}).get("stock") != 12_345:
                assert time.monotonic() < deadline, "the worker did not recover"
                time.sleep(0.05)
            # The pass that stored the row logs its recovery once it ends.
            while not any("working again" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, "the recovery was never logged"
                time.sleep(0.05)
        finally:
            worker.request_stop()
            thread.join(10)
            engine.dispose()
    assert not thread.is_alive()
