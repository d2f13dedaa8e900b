"""Row cache workers, writers and readers at once, as real processes, then
the invariants checked from what each of them logged.

* Several workers never refresh a row twice for one due time, and a worker
  killed while holding rows (SIGKILL, mid-load) delays them by one lease,
  no more: nothing wedges.
* Writers change rows in the database and then invalidate them (or call
  refresh_now) while workers refresh and readers read through: no reader
  that starts after a write was acknowledged ever sees an older version.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import os
import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import webtier
from tests.helpers.rows import seed
from webtier.config import Config, RowSettings
from webtier.demo import shopdb
from webtier.rows import Row, Source
from webtier.workers import JOBS, Worker

pytestmark = pytest.mark.slow


class LoggingSource(Source):
    """The shop's real inventory source, logging every load to a file:
    ``<key> <time> <pid>`` per row, the time the load began (a refresh's
    next claim comes at least ``delay`` after its store, so after its load
    began, however slow the query). ``hang`` makes it log the keys and then
    never return (a hung worker)."""

    def __init__(self, db_url: str, log: str, *, pause: float = 0.0, hang: bool = False) -> None:
        super().__init__(shopdb.SHOP_INVENTORY)  # the rows the test schedules
        self.inner = shopdb.inventory_source(db_url)
        self.log, self.pause, self.hang = log, pause, hang

    def key(self, row_id: object) -> str:
        return self.inner.key(row_id)

    def load(self, keys: Sequence[str]) -> dict[str, Row]:
        self._write(keys)
        if self.hang:
            time.sleep(3600)
        rows = self.inner.load(keys)
        if self.pause:
            time.sleep(self.pause)  # widens the window between a load's read and its store
        return rows

    def _write(self, keys: Sequence[str]) -> None:
        now = time.time()
        with open(self.log, "a") as out:
            out.writelines(f"{key} {now:.6f} {os.getpid()}\n" for key in keys)


def _settings(source: Source, **extra: Any) -> RowSettings:
    return RowSettings(sources=(source,), shards=8, batch=20, poll=0.01, **extra)


def _run_worker(
    redis_url: str, prefix: str, db_url: str, log: str, until: float, extra: dict[str, Any]
) -> None:
    hang = extra.pop("hang", False)
    pause = extra.pop("pause", 0.0)
    source = LoggingSource(db_url, log, pause=pause, hang=hang)
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, Config(prefix=prefix, rows=_settings(source, **extra)))
    worker = Worker(tier, [JOBS["rows"]], heartbeat=1.0)
    threading.Timer(max(0.0, until - time.time()), worker.request_stop).start()
    worker.run()
    client.close()


def _read_log(path: Path) -> list[tuple[str, float, int]]:
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        key, at, pid = line.split()
        found.append((key, float(at), int(pid)))
    return found


def _db_url(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


# -- no double refresh; a dead worker's rows come back after one lease --------------------

ROWS = 300
DELAY = 0.5  # seconds
# Longer than a round can take on a loaded machine: a round that outlives
# its lease is retried by another worker, by design, which would be a
# second load for a new due time, not the double refresh looked for here.
LEASE = 5.0  # seconds
SECONDS = 20.0
TOLERANCE = 0.02  # seconds: ms rounding of server times


@pytest.mark.parametrize("target", ["cluster"])
@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
def test_workers_refresh_each_due_row_once_and_a_killed_worker_wedges_nothing(
    redis_url: str, prefix: str, database: sa.Engine, tmp_path: Path
) -> None:
    seed(database, ROWS)
    db_url = _db_url(database)
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, Config(prefix=prefix, rows=RowSettings(shards=8)))
    source = shopdb.inventory_source(database)
    for item_id in range(1, ROWS + 1):
        tier.rows.schedule(source, item_id, DELAY)
    started = time.time()
    until = started + SECONDS
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(
            target=_run_worker,
            args=(redis_url, prefix, db_url, str(tmp_path / f"w{i}.log"), until, {"lease": LEASE}),
        )
        for i in range(3)
    ]
    victim_log = tmp_path / "victim.log"
    victim = context.Process(
        target=_run_worker,
        args=(redis_url, prefix, db_url, str(victim_log), until, {"lease": LEASE, "hang": True}),
    )
    for process in [*workers, victim]:
        process.start()
    try:
        deadline = time.time() + 15
        while not victim_log.exists() or not victim_log.read_text():
            assert time.time() < deadline, "the victim never claimed a row"
            time.sleep(0.01)
        time.sleep(0.2)  # inside its load, holding its rows
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.join()
        for process in workers:
            process.join(SECONDS + 30)
            assert process.exitcode == 0
    finally:
        for process in [*workers, victim]:
            if process.is_alive():
                process.kill()
        client.close()

    loads: dict[str, list[float]] = defaultdict(list)
    for i in range(3):
        for key, at, _ in _read_log(tmp_path / f"w{i}.log"):
            loads[key].append(at)
    held = _read_log(victim_log)
    killed_at = {key: at for key, at, _ in held}
    assert killed_at, "the victim held no rows"
    assert len(loads) == ROWS, "some rows were never refreshed"

    # 1. Never twice for one due time: a row's next refresh is due `delay`
    #    after its copy was stored, so two loads are at least that far apart.
    too_close = [
        (key, round(b - a, 4))
        for key, times in loads.items()
        for a, b in itertools.pairwise(sorted(times))
        if b - a < DELAY - TOLERANCE
    ]
    assert too_close == [], f"{len(too_close)} double refreshes, e.g. {too_close[:5]}"

    # 2. Nothing wedges: every row keeps being refreshed, to the end.
    slack = 3.0  # a loaded 2-core machine
    for key, times in loads.items():
        times.sort()
        assert len(times) > 1, f"row {key} was refreshed once, then never again"
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert max(gaps) < DELAY + LEASE + slack, (key, max(gaps))
        assert times[-1] > until - (DELAY + LEASE + slack), key

    # 3. The rows the killed worker held: nobody else took them before its
    #    lease ran out, and somebody did soon after.
    for key, claimed in killed_at.items():
        after = [at for at in loads[key] if at > claimed]
        assert after, f"row {key} held by the killed worker was never refreshed again"
        assert after[0] - claimed > LEASE - 0.2, (key, after[0] - claimed)
        assert after[0] - claimed < LEASE + slack, (key, after[0] - claimed)


# -- writers, readers and workers: no reader sees a version older than an acknowledged write

FENCE_ROWS = 20
FENCE_SECONDS = 20.0


def _writer(
    redis_url: str, prefix: str, db_url: str, until: float, seed_: int
) -> list[tuple[str, int, float]]:
    rng = random.Random(seed_)
    source = shopdb.inventory_source(db_url)
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, Config(prefix=prefix, rows=_settings(source)))
    inv = shopdb.inventory
    acknowledged = []
    while time.time() < until:
        item_id = rng.randint(1, FENCE_ROWS)
        with source.engine.begin() as conn:
            conn.execute(inv.update().where(inv.c.item_id == item_id).values(stock=inv.c.stock + 1))
            version = conn.scalar(sa.select(inv.c.stock).where(inv.c.item_id == item_id))
        if rng.random() < 0.25:
            tier.rows.refresh_now(source, item_id)
        else:
            tier.rows.invalidate(source, item_id)
        acknowledged.append((str(item_id), int(version), time.time()))
        time.sleep(rng.uniform(0, 0.01))
    client.close()
    return acknowledged


def _reader(
    redis_url: str, prefix: str, db_url: str, until: float, use_asyncio: bool
) -> list[tuple[str, int, float]]:
    source = shopdb.inventory_source(db_url)
    config = Config(prefix=prefix, rows=_settings(source))
    rng = random.Random(os.getpid())
    seen: list[tuple[str, int, float]] = []
    if not use_asyncio:
        client = webtier.connect(redis_url)
        tier = webtier.WebTier(client, config)
        while time.time() < until:
            item_id = rng.randint(1, FENCE_ROWS)
            started = time.time()
            row = tier.rows.get(source, item_id, load=True)
            assert row is not None
            seen.append((str(item_id), row["stock"], started))
        client.close()
        return seen

    async def read() -> None:
        aclient = webtier.connect_async(redis_url)
        atier = webtier.AsyncWebTier(aclient, config)
        while time.time() < until:
            item_id = rng.randint(1, FENCE_ROWS)
            started = time.time()
            row = await atier.rows.get(source, item_id, load=True)
            assert row is not None
            seen.append((str(item_id), row["stock"], started))
        await aclient.aclose()

    asyncio.run(read())
    return seen


@pytest.mark.parametrize("target", ["standalone"])
@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_no_reader_sees_a_row_older_than_an_acknowledged_write(
    redis_url: str, prefix: str, database: sa.Engine, tmp_path: Path
) -> None:
    seed(database, FENCE_ROWS)
    with database.begin() as conn:
        conn.execute(shopdb.inventory.update().values(stock=0))
    db_url = _db_url(database)
    client = webtier.connect(redis_url)
    source = shopdb.inventory_source(database)
    tier = webtier.WebTier(client, Config(prefix=prefix, rows=_settings(source)))
    for item_id in range(1, FENCE_ROWS + 1):
        tier.rows.schedule(source, item_id, 0.05)
    until = time.time() + FENCE_SECONDS + 3  # processes take a moment to start
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(
            target=_run_worker,
            args=(redis_url, prefix, db_url, str(tmp_path / f"w{i}.log"), until, {"pause": 0.01}),
        )
        for i in range(2)
    ]
    for process in workers:
        process.start()
    try:
        with context.Pool(3) as pool:
            writing = pool.apply_async(_writer, (redis_url, prefix, db_url, until - 2, 1))
            readers = [
                pool.apply_async(_reader, (redis_url, prefix, db_url, until, use_asyncio))
                for use_asyncio in (False, True)
            ]
            acknowledged = writing.get(FENCE_SECONDS + 60)
            seen = [s for r in readers for s in r.get(FENCE_SECONDS + 60)]
        for process in workers:
            process.join(30)
            assert process.exitcode == 0
    finally:
        for process in workers:
            if process.is_alive():
                process.kill()

    assert len(acknowledged) > 50, "the writer hardly wrote: the test proved little"
    assert len(seen) > 500, "the readers hardly read: the test proved little"
    writes: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for key, version, at in acknowledged:
        writes[key].append((at, version))
    stale = []
    for key, version, started in seen:
        newest = max((v for at, v in writes[key] if at < started), default=0)
        if version < newest:
            stale.append((key, version, newest))
    assert stale == [], f"{len(stale)} stale reads of {len(seen)}, e.g. {stale[:5]}"
    refreshed = sum(len(_read_log(tmp_path / f"w{i}.log")) for i in range(2))
    assert refreshed > 200, "the workers hardly ran: the test proved little"

    # And at rest, every cached copy is the database's row.
    with contextlib.closing(client):
        tier.rows.refresh_due()
        for item_id in range(1, FENCE_ROWS + 1):
            cached = tier.rows.get(source, item_id)
            with database.connect() as conn:
                stock = conn.scalar(
                    sa.select(shopdb.inventory.c.stock).where(shopdb.inventory.c.item_id == item_id)
                )
            assert cached is not None
            assert cached["stock"] == stock, item_id
