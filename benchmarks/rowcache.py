"""The row cache benchmark: webtier's row cache against the book's Listings
2.7-2.8 (:mod:`benchmarks.book`), on the same Redis and the same
databases (SQLite, and PostgreSQL), in one run.

Rows (docs/benchmarks.md says more):

* refresh, 10,000 due -- ``tier.rows.refresh_due()`` (claims in batches,
  one query per 500 rows) vs the book's ``cache_rows`` loop (4 round trips
  and one query per row), from SQLite and from PostgreSQL;
* read -- ``tier.rows.get()`` of a cached row vs a primary-key ``SELECT``
  through SQLAlchemy on the same machine, prepared once or built per call,
  next to the raw limit of a Redis ``GET`` from ``redis-benchmark``.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmarks import _row_workloads as w
from benchmarks import book
from benchmarks._counter_workloads import client_on, tier_on
from benchmarks._harness import Contender, Harness, Pass
from benchmarks._results import Goal, Measurement, Row
from webtier._core.keys import shard_of
from webtier.config import Config
from webtier.demo import shopdb
from webtier.errors import EmbeddedServerError

TITLE = "webtier bench rowcache"

REFRESH_ROWS = 10_000
DELAY = 3600.0  # seconds: each row is refreshed once per run

WEBTIER_REFRESH_COMMANDS = frozenset({"evalsha", "del"})
BOOK_REFRESH_COMMANDS = frozenset({"zrange", "zscore", "zadd", "set", "zrem", "del"})
READ_COMMANDS = frozenset({"get"})

# Targets (reported, never enforced).
REFRESH_GOALS = (Goal(5),)
READ_GOALS = (Goal(2),)


@dataclass(frozen=True, slots=True)
class Database:
    name: str  # "SQLite", "PostgreSQL"
    url: str


@contextlib.contextmanager
def databases(postgres_url: str | None) -> Iterator[tuple[list[Database], str]]:
    """A SQLite file and a PostgreSQL (the one given, else one of the bench's
    own), and a note when PostgreSQL could not be had."""
    note = ""
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="webtier-bench-")))
        found = [Database("SQLite", f"sqlite:///{folder / 'shop.db'}")]
        if postgres_url is None:
            try:
                from webtier.testing.pgserver import PostgresServer

                server = stack.enter_context(PostgresServer.start())
                postgres_url = server.url
            except (EmbeddedServerError, ImportError) as error:
                note = f"PostgreSQL rows n/a: {error}"
        if postgres_url is not None:
            found.append(Database("PostgreSQL", postgres_url))
        yield found, note


def run(h: Harness, postgres_url: str | None = None) -> list[Row]:
    rows: list[Row] = []
    size = h.settings.size(REFRESH_ROWS)
    with databases(postgres_url) as (found, note):
        if note:
            h.notes.append(note)
        for db in found:
            h.say(f"{db.name}: seeding {size:,} items")
            w.seed(db.url, size)
            rows.append(_refresh(h, db, size))
        for db in found:
            rows += _reads(h, db)
    return rows


def _refresh(h: Harness, db: Database, size: int) -> Row:
    engine = w.engine_on(db.url)
    source = shopdb.inventory_source(engine)
    reports = []
    try:
        with tier_on(h.server.url) as tier:
            tier.rows.refresh_due([source])  # loads the scripts

            def prepare_ours() -> None:
                h.server.flush()
                for item_id in range(1, size + 1):
                    tier.rows.schedule(source, item_id, DELAY)

            def ours() -> int:
                report = tier.rows.refresh_due([source])
                reports.append(report)
                if report.stored != size:
                    raise RuntimeError(f"webtier refreshed {report.stored} of {size} rows")
                return report.stored

            def prepare_theirs() -> None:
                h.server.flush()
                w.book_schedule_all(h.server.book_url, size, DELAY)

            with client_on(h.server.book_url, decode_responses=True) as conn:
                get = w.book_inventory_get(engine)

                def theirs() -> int:
                    done = 0
                    while book.cache_rows_step(conn, get):
                        done += 1
                    return done

                unit = "rows/s"
                ours_m, theirs_m = h.passes(
                    [
                        Pass(
                            f"webtier rows.refresh_due ({db.name})",
                            prepare_ours,
                            ours,
                            WEBTIER_REFRESH_COMMANDS,
                        ),
                        Pass(
                            f"book cache_rows ({db.name})",
                            prepare_theirs,
                            theirs,
                            BOOK_REFRESH_COMMANDS,
                        ),
                    ],
                    unit,
                )
            cached = w.book_cached_rows(h.server.book_url)
            if cached != size:
                raise RuntimeError(f"the book's loop cached {cached} of {size} rows")
    finally:
        source.dispose()
        engine.dispose()
    last = reports[-1]
    note = (
        f"{size:,} rows due; webtier: {last.claimed:,} claimed, one query per "
        f"{Config().rows.batch} rows; book: 4 round trips and one query per row"
    )
    return Row(
        f"refresh, {size:,} due, {db.name}",
        "rows/s",
        1,
        ours_m,
        theirs_m,
        goals=REFRESH_GOALS,
        note=note,
    )


def _reads(h: Harness, db: Database) -> list[Row]:
    h.server.flush()
    ours, prepared, core = h.loops(
        [
            Contender(
                f"webtier rows.get ({db.name} source)",
                partial(w.webtier_get, h.server.url, db.url),
                READ_COMMANDS,
            ),
            Contender(f"SELECT, prepared ({db.name})", partial(w.select_prepared, db.url)),
            Contender(f"SELECT, built per call ({db.name})", partial(w.select_core, db.url)),
        ],
        1,
        unit="reads/s",
    )
    raw = _raw_get(h)
    found = []
    for baseline, how in ((prepared, "prepared once"), (core, "built per call")):
        note = (
            f"book column: a primary-key SELECT of the same row through SQLAlchemy Core, "
            f"{how}, on the same machine; latency webtier {1e6 / ours.value:.0f} µs, "
            f"SELECT {1e6 / baseline.value:.0f} µs"
        )
        found.append(
            Row(
                f"read, cached row vs {db.name} SELECT ({how})",
                "reads/s",
                1,
                ours,
                baseline,
                raw=raw,
                goals=READ_GOALS,
                note=note,
            )
        )
    return found


def _raw_get(h: Harness) -> Measurement | None:
    """redis-benchmark's GET of a cached row: the Redis part's own limit."""
    config = Config()
    key = config.keys.row_shard(shopdb.SHOP_INVENTORY, shard_of("1", config.rows.shards)).row("1")
    value = h.server.admin.get(key)
    if value is None:
        raise RuntimeError("row 1 is not cached")
    return h.raw("raw: GET of a cached row", [(("GET", key), 1)], 1, h.server.admin)
