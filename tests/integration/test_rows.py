"""The row cache on real Redis (every target, sync and asyncio) and real SQL
databases (SQLite and PostgreSQL)."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import anyio
import pytest
import sqlalchemy as sa

import webtier
from tests.helpers.rows import Instrumented, db_row, delete_item, seed, set_stock, take_load
from tests.helpers.servers import all_keys, run_script
from webtier._core.keys import shard_of
from webtier.config import Config, RowSettings
from webtier.demo import shopdb
from webtier.errors import InvalidInput, SourceError
from webtier.rows import FunctionSource
from webtier.rows.codec import encode
from webtier.rows.ops import bookkeeping_ms, store_request
from webtier.rows.sql import SqlSource
from webtier.workers import JOBS, AsyncWorker, warm_rows

pytestmark = pytest.mark.anyio


# For tests of Redis-side logic the database matters not: SQLite alone.
sqlite_only = pytest.mark.parametrize("database", ["sqlite"], indirect=True)


def rows_config(prefix: str, **settings: Any) -> Config:
    return Config(prefix=prefix, rows=RowSettings(**settings))


# -- reading ----------------------------------------------------------------------------


@pytest.mark.matrix
async def test_read_through_caches_rows_that_decode_to_equal_values(
    tier: Any, database: sa.Engine
) -> None:
    source = seed(database)
    assert await tier.rows.get(source, 7) is None  # nothing cached yet
    expected = db_row(database, 7)
    assert expected is not None
    assert isinstance(expected["price"], Decimal)
    assert isinstance(expected["sku"], uuid.UUID)
    assert isinstance(expected["updated_at"], dt.datetime)
    got = await tier.rows.get(source, 7, load=True)
    assert got == expected
    assert await tier.rows.get(source, 7) == expected  # now from Redis only
    assert await tier.rows.get(source, "7") == expected  # "7" and 7 are one row
    assert await tier.rows.get(source, 999, load=True) is None  # no such row


async def test_nulls_dates_and_decimals_survive(tier: Any, database: sa.Engine) -> None:
    source = seed(database, 200)
    ids = range(1, 201)
    assert set((await tier.rows.get_many(source, ids)).values()) == {None}
    for item_id in ids:
        await tier.rows.schedule(source, item_id, 60)
    assert (await tier.rows.refresh_due([source])).stored == 200
    got = await tier.rows.get_many(source, [*ids, 5000])
    assert got[5000] is None
    with database.connect() as conn:
        expected = {r.item_id: dict(r._mapping) for r in conn.execute(sa.select(shopdb.inventory))}
    assert {i: got[i] for i in ids} == expected
    # The seeded rows hold NULLs and values in every optional column.
    assert {got[i]["sale_ends"] is None for i in ids} == {True, False}
    assert {got[i]["restocked_at"] is None for i in ids} == {True, False}


@sqlite_only
@pytest.mark.matrix
async def test_concurrent_misses_load_the_row_once(tier: Any, database: sa.Engine) -> None:
    source = Instrumented(seed(database), pause=0.3)
    results: list[Any] = []

    async def read() -> None:
        results.append(await tier.rows.get(source, 3, load=True))

    async with anyio.create_task_group() as group:
        for _ in range(8):
            group.start_soon(read)
    assert source.loads == 1
    assert results == [db_row(database, 3)] * 8


@sqlite_only
@pytest.mark.matrix
async def test_many_misses_load_with_one_query_and_are_cached(
    tier: Any, database: sa.Engine
) -> None:
    source = Instrumented(seed(database, 40))
    await tier.rows.get(source, 1, load=True)  # one cached already
    assert source.loads == 1
    ids = [1, *range(2, 31), 999]  # 999: no such row
    got = await tier.rows.get_many(source, ids, load=True)
    assert source.loads == 2  # the 29 misses and the missing row: one query
    assert got == {i: db_row(database, i) for i in ids}
    assert got[999] is None
    # Cached now, the missing row remembered: no query more.
    assert await tier.rows.get_many(source, ids, load=True) == got
    assert await tier.rows.get_many(source, ids) == got
    assert source.loads == 2


@sqlite_only
@pytest.mark.matrix
async def test_concurrent_many_misses_load_each_row_once(tier: Any, database: sa.Engine) -> None:
    source = Instrumented(seed(database, 20), pause=0.3)
    ids = list(range(1, 11))
    results: list[Any] = []

    async def read() -> None:
        results.append(await tier.rows.get_many(source, ids, load=True))

    async with anyio.create_task_group() as group:
        for _ in range(6):
            group.start_soon(read)
    # Each row is loaded once, whoever took its load (on Cluster two
    # readers' fills reach the nodes in different orders: two queries may
    # share the rows); the others wait for its copy.
    assert sorted(source.loaded, key=int) == [str(i) for i in ids]
    assert results == [{i: db_row(database, i) for i in ids}] * 6


@sqlite_only
async def test_a_failed_many_load_gives_the_rows_back_at_once(
    tier: Any, database: sa.Engine
) -> None:
    source = seed(database, 10)
    with database.begin() as conn:
        conn.execute(sa.text("ALTER TABLE inventory RENAME TO inventory_away"))
    with pytest.raises(SourceError, match="loading 3 rows failed"):
        await tier.rows.get_many(source, [1, 2, 3], load=True)
    with database.begin() as conn:
        conn.execute(sa.text("ALTER TABLE inventory_away RENAME TO inventory"))
    # No load left holding them: the next reader loads at once, no lease wait.
    assert (await tier.rows.status(source)).loading == 0
    got = await tier.rows.get_many(source, [1, 2, 3], load=True)
    assert got == {i: db_row(database, i) for i in (1, 2, 3)}


@sqlite_only
@pytest.mark.matrix
async def test_a_reader_that_died_mid_load_delays_others_by_one_lease(
    tier_factory: Any, prefix: str, redis_url: str, database: sa.Engine
) -> None:
    tier = tier_factory(rows_config(prefix, fill_lease=0.5))
    source = seed(database)
    take_load(redis_url, tier.config, "4", 500)
    started = time.monotonic()
    assert await tier.rows.get(source, 4, load=True) == db_row(database, 4)
    waited = time.monotonic() - started
    assert 0.3 < waited < 3.0


@sqlite_only
async def test_rows_the_database_lacks_are_remembered_briefly(
    tier_factory: Any, prefix: str, database: sa.Engine
) -> None:
    tier = tier_factory(rows_config(prefix, missing_ttl=0.4))
    source = Instrumented(seed(database))
    assert await tier.rows.get(source, 77, load=True) is None
    assert await tier.rows.get(source, 77, load=True) is None
    assert source.loads == 1  # the second miss did not reach the database
    await anyio.sleep(0.5)
    assert await tier.rows.get(source, 77, load=True) is None
    assert source.loads == 2


@sqlite_only
async def test_copies_of_unscheduled_rows_expire_scheduled_ones_do_not(
    tier_factory: Any, prefix: str, redis_url: str, database: sa.Engine
) -> None:
    tier = tier_factory(rows_config(prefix, ttl=60))
    source = seed(database)
    await tier.rows.get(source, 1, load=True)
    key = tier.config.keys.row_shard(shopdb.SHOP_INVENTORY, shard_of("1", 16)).row("1")
    client = webtier.connect(redis_url)
    try:
        assert 0 < client.pttl(key) <= 60_000
        await tier.rows.schedule(source, 1, 30)
        assert client.pttl(key) == -1  # lives while scheduled
        await tier.rows.unschedule(source, 1)
        assert client.exists(key) == 0  # the book's rule: unscheduling drops the copy
    finally:
        client.close()


# -- memory with no worker running ------------------------------------------------------


@sqlite_only
@pytest.mark.matrix
async def test_the_bookkeeping_of_loads_expires_with_no_worker_running(
    tier_factory: Any, prefix: str, redis_url: str, database: sa.Engine
) -> None:
    config = rows_config(prefix, shards=1)
    tier = tier_factory(config)
    source = seed(database)
    broken = FunctionSource("broken", lambda key: 1 / 0)  # type: ignore[arg-type,return-value]
    await tier.rows.get(source, 2, load=True)  # a ticket handed out: seq
    take_load(redis_url, config, "4", 60_000)  # a reader that died: fill, lease
    await tier.rows.schedule(broken, 1, 60)
    with pytest.raises(SourceError):
        await tier.rows.get(broken, 1, load=True)  # a failure counted: fail
    shard, failing = (config.keys.row_shard(name, 0) for name in (shopdb.SHOP_INVENTORY, "broken"))
    longest = bookkeeping_ms(config.rows)
    assert longest >= 86_400_000
    client = webtier.connect(redis_url)
    try:
        for key in (shard.seq, shard.fill, shard.lease, failing.seq, failing.fail):
            assert 0 < client.pttl(key) <= longest, key
    finally:
        webtier.disconnect(client)


@sqlite_only
@pytest.mark.matrix
async def test_readers_that_died_mid_load_leave_nothing_behind_with_no_worker_running(
    tier_factory: Any, prefix: str, redis_url: str, database: sa.Engine
) -> None:
    config = rows_config(prefix, shards=1, fill_lease=0.2)
    tier = tier_factory(config)
    source = seed(database)
    for key in ("10", "11", "12", "13", "14"):
        take_load(redis_url, config, key, 200)
    await anyio.sleep(0.3)  # their leases run out; no worker claims, so none prunes them
    assert await tier.rows.get(source, 2, load=True) == db_row(database, 2)
    shard = config.keys.row_shard(shopdb.SHOP_INVENTORY, 0)
    client = webtier.connect(redis_url)
    try:
        assert (client.hlen(shard.fill), client.zcard(shard.lease)) == (0, 0)
    finally:
        webtier.disconnect(client)


@sqlite_only
@pytest.mark.matrix
async def test_tickets_never_repeat_after_the_sequence_expires(
    tier_factory: Any, prefix: str, redis_url: str, database: sa.Engine
) -> None:
    config = rows_config(prefix, shards=1)
    tier = tier_factory(config)
    source = seed(database)
    before = db_row(database, 5)
    assert before is not None
    slow = take_load(redis_url, config, "5", 60_000)  # a reader reads v1, and stalls
    set_stock(database, 5, 777)
    await tier.rows.invalidate(source, 5)  # the app writes v2, then invalidates
    shard = config.keys.row_shard(shopdb.SHOP_INVENTORY, 0)
    client = webtier.connect(redis_url)
    try:
        # What the sequence's TTL does once no ticket was handed out for that
        # long (or a restart of a Redis without persistence).
        client.delete(shard.seq)
    finally:
        webtier.disconnect(client)
    newer = take_load(redis_url, config, "5", 60_000)  # another reader takes the load
    number = lambda ticket: int(ticket.split("-")[0])  # noqa: E731 (the sequence, without the nonce)
    assert number(newer) > number(slow)
    # The stalled reader stores what it read before the write: refused.
    store = store_request(config, shard, [("5", slow, "f", encode(before))])
    assert run_script(redis_url, store.commands[0]) == [0]
    assert await tier.rows.get(source, 5) is None


# -- the schedule -----------------------------------------------------------------------


@pytest.mark.matrix
async def test_scheduled_rows_are_refreshed_when_due(tier: Any, database: sa.Engine) -> None:
    source = seed(database, 20)
    delay = 1.0
    for item_id in range(1, 21):
        assert await tier.rows.schedule(source, item_id, delay) is True
    assert await tier.rows.schedule(source, 1, delay) is False  # already scheduled
    assert (await tier.rows.status(source)).due == 20
    report = await tier.rows.refresh_due([source])
    stored_at = time.monotonic()
    assert (report.claimed, report.stored) == (20, 20)
    assert await tier.rows.get(source, 5) == db_row(database, 5)
    set_stock(database, 5, 4242)
    early = await tier.rows.refresh_due([source])
    if time.monotonic() - stored_at < delay:  # (a loaded machine may take longer)
        assert early.claimed == 0  # not due yet
        assert (await tier.rows.get(source, 5))["stock"] != 4242
    await anyio.sleep(max(0.0, stored_at + delay + 0.05 - time.monotonic()))
    on_time = await tier.rows.refresh_due([source])
    if not early.claimed:
        assert on_time.stored == 20
    assert (await tier.rows.get(source, 5))["stock"] == 4242


@sqlite_only
async def test_zero_or_negative_delay_unschedules_and_drops_the_copy(
    tier: Any, database: sa.Engine
) -> None:
    source = seed(database)
    await tier.rows.schedule(source, 1, 10)
    await tier.rows.schedule(source, 2, 10)
    await tier.rows.refresh_due([source])
    await tier.rows.schedule(source, 1, 0)
    await tier.rows.schedule(source, 2, -5)
    assert await tier.rows.get(source, 1) is None
    assert await tier.rows.get(source, 2) is None
    assert (await tier.rows.status(source)).scheduled == 0


@sqlite_only
async def test_a_row_scheduled_without_a_delay_is_unscheduled_not_a_crash(
    tier: Any, redis_url: str, database: sa.Engine
) -> None:
    source = seed(database)
    await tier.rows.schedule(source, 6, 0.05)
    await tier.rows.refresh_due([source])
    assert await tier.rows.get(source, 6) is not None
    shard = tier.config.keys.row_shard(shopdb.SHOP_INVENTORY, shard_of("6", 16))
    client = webtier.connect(redis_url)
    try:
        client.hdel(shard.delay, "6")  # the book's `delay:` lost the row
    finally:
        client.close()
    await anyio.sleep(0.1)
    report = await tier.rows.refresh_due([source])
    assert (report.dropped, report.claimed) == (1, 0)
    assert await tier.rows.get(source, 6) is None
    assert (await tier.rows.status(source)).scheduled == 0


async def test_rows_deleted_in_the_database_leave_the_cache(tier: Any, database: sa.Engine) -> None:
    source = seed(database)
    await tier.rows.schedule(source, 9, 0.1)
    await tier.rows.schedule(source, 10, 0.1)
    await tier.rows.refresh_due([source])
    delete_item(database, 9)
    await anyio.sleep(0.15)
    report = await tier.rows.refresh_due([source])
    assert (report.stored, report.removed) == (1, 1)
    assert await tier.rows.get(source, 9) is None
    assert await tier.rows.get(source, 10) is not None
    assert (await tier.rows.status(source)).scheduled == 1


@pytest.mark.matrix
async def test_many_due_rows_load_with_one_query_per_batch(
    tier_factory: Any, prefix: str, database: sa.Engine
) -> None:
    tier = tier_factory(rows_config(prefix, batch=50))
    source = seed(database, 500)
    for item_id in range(1, 501):
        await tier.rows.schedule(source, item_id, 60)
    selects: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            selects.append(statement)

    sa.event.listen(database, "before_cursor_execute", count)
    try:
        report = await tier.rows.refresh_due([source])
    finally:
        sa.event.remove(database, "before_cursor_execute", count)
    assert report.stored == 500
    assert len(selects) == 10  # 500 rows, 50 a query
    assert await tier.rows.get(source, 500) == db_row(database, 500)


async def test_a_database_error_keeps_the_copy_and_the_rows_are_retried(
    tier: Any, database: sa.Engine
) -> None:
    source = seed(database)
    await tier.rows.schedule(source, 1, 0.05)
    await tier.rows.refresh_due([source])
    cached = await tier.rows.get(source, 1)
    with database.begin() as conn:
        conn.execute(sa.text("ALTER TABLE inventory RENAME TO inventory_away"))
    await anyio.sleep(0.1)
    with pytest.raises(SourceError, match="loading 1 rows failed: table 'inventory' not found"):
        await tier.rows.refresh_due([source])
    with pytest.raises(SourceError) as failed:  # the database's own error is kept, chained
        await tier.rows.refresh_due([source])
    assert isinstance(failed.value.__cause__.__cause__, sa.exc.SQLAlchemyError)
    assert await tier.rows.get(source, 1) == cached  # left in place
    status = await tier.rows.status(source)
    # Given back, not held: due again at once; the worker backs off as a whole.
    assert (status.due, status.loading) == (1, 0)
    with database.begin() as conn:
        conn.execute(sa.text("ALTER TABLE inventory_away RENAME TO inventory"))
    set_stock(database, 1, 31337)
    assert (await tier.rows.refresh_due([source])).stored == 1
    assert (await tier.rows.get(source, 1))["stock"] == 31337


# -- the write path: no older copy over a newer one ----------------------------------------


async def wait_read(source: Instrumented) -> None:
    """Wait for ``source`` to have queried, cancellably: if the load fails
    instead, its task group cancels this wait and its error is reported
    (a plain thread wait would hang the test run)."""
    read = await anyio.to_thread.run_sync(source.read.wait, 60, abandon_on_cancel=True)
    assert read, "the load never queried the database"


async def while_loading(
    source: Instrumented, load: Callable[[], Awaitable[Any]], write: Callable[[], Awaitable[Any]]
) -> Any:
    """Start ``load``; once it has queried the database, ``write``; then let
    the load go on to store. Returns what ``load`` returned."""
    results = []

    async def run() -> None:
        results.append(await load())

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await wait_read(source)
        await write()
        source.gate.set()
    return results[0]


@pytest.mark.matrix
async def test_a_refresh_that_read_before_a_write_never_overwrites_it(
    tier: Any, database: sa.Engine
) -> None:
    source = Instrumented(seed(database), gated=True)
    await tier.rows.schedule(source, 1, 60)

    async def write() -> None:
        set_stock(database, 1, 999)  # the application writes...
        assert await tier.rows.invalidate(source, 1) is False  # ...then invalidates

    report = await while_loading(source, lambda: tier.rows.refresh_due([source]), write)
    assert (report.fenced, report.stored) == (1, 0)
    assert await tier.rows.get(source, 1) is None  # not the old copy
    assert (await tier.rows.refresh_due([source])).stored == 1  # due at once
    assert (await tier.rows.get(source, 1))["stock"] == 999


@pytest.mark.matrix
async def test_a_read_through_that_read_before_a_write_never_caches_it(
    tier: Any, database: sa.Engine
) -> None:
    source = Instrumented(seed(database), gated=True)
    old = db_row(database, 2)

    async def write() -> None:
        set_stock(database, 2, 555)
        await tier.rows.invalidate(source, 2)

    seen = await while_loading(source, lambda: tier.rows.get(source, 2, load=True), write)
    assert seen == old  # the read overlapped the write: either answer is right
    assert await tier.rows.get(source, 2) is None  # but the old copy is not cached
    assert (await tier.rows.get(source, 2, load=True))["stock"] == 555


@pytest.mark.matrix
async def test_refresh_now_wins_over_a_slower_older_refresh(tier: Any, database: sa.Engine) -> None:
    plain = seed(database)
    slow = Instrumented(plain, gated=True)
    await tier.rows.schedule(slow, 3, 60)

    async def write() -> None:
        set_stock(database, 3, 777)
        fresh = await tier.rows.refresh_now(plain, 3)
        assert fresh is not None
        assert fresh["stock"] == 777

    report = await while_loading(slow, lambda: tier.rows.refresh_due([slow]), write)
    assert report.fenced == 1
    assert (await tier.rows.get(plain, 3))["stock"] == 777


@pytest.mark.matrix
async def test_refresh_now_fenced_by_a_newer_load_leaves_no_older_copy(
    tier: Any, database: sa.Engine
) -> None:
    plain = seed(database)
    await tier.rows.schedule(plain, 5, 0.2)
    await tier.rows.refresh_due([plain])
    old = await tier.rows.get(plain, 5)
    assert old is not None
    set_stock(database, 5, 8888)  # the application's write...
    now = Instrumented(plain, gated=True)
    worker = Instrumented(plain, gated=True)
    results: dict[str, Any] = {}

    async def refresh_now() -> None:
        results["now"] = await tier.rows.refresh_now(now, 5)  # ...then its refresh

    async def refresh_due() -> None:
        results["worker"] = await tier.rows.refresh_due([worker])

    async with anyio.create_task_group() as group:
        try:
            group.start_soon(refresh_now)
            await wait_read(now)  # refresh_now read the new row
            await anyio.sleep(0.25)  # the row comes due: a worker takes a newer ticket
            group.start_soon(refresh_due)
            await wait_read(worker)
            now.gate.set()  # refresh_now stores, fenced by the worker's newer ticket
            while "now" not in results:
                await anyio.sleep(0.01)
            # refresh_now returned: no reader may see the copy from before the write.
            results["seen"] = await tier.rows.get(plain, 5)
        finally:
            now.gate.set()
            worker.gate.set()
    assert results["now"]["stock"] == 8888
    assert results["seen"] is None or results["seen"]["stock"] == 8888, results["seen"]
    assert results["worker"].stored == 1
    assert (await tier.rows.get(plain, 5))["stock"] == 8888


@sqlite_only
async def test_refresh_now_of_a_deleted_row_removes_it(tier: Any, database: sa.Engine) -> None:
    source = seed(database)
    await tier.rows.schedule(source, 8, 60)
    await tier.rows.refresh_due([source])
    delete_item(database, 8)
    assert await tier.rows.refresh_now(source, 8) is None
    assert await tier.rows.get(source, 8) is None
    assert (await tier.rows.status(source)).scheduled == 0


@sqlite_only
async def test_invalidate_makes_a_scheduled_row_due_now(tier: Any, database: sa.Engine) -> None:
    source = seed(database)
    await tier.rows.schedule(source, 4, 3600)
    await tier.rows.refresh_due([source])
    assert (await tier.rows.status(source)).due == 0
    set_stock(database, 4, 1)
    assert await tier.rows.invalidate(source, 4) is True
    assert await tier.rows.get(source, 4) is None
    assert (await tier.rows.status(source)).due == 1
    await tier.rows.refresh_due([source])
    assert (await tier.rows.get(source, 4))["stock"] == 1


# -- keys and input -----------------------------------------------------------------------

ODD_KEYS = ["a:b", "{x}", "{", "row:1", "due", "1 2", "../etc", "ünï ✓ 页", "x" * 1024, "0", "00"]


@pytest.mark.matrix
async def test_any_ordinary_text_key_works_and_keys_never_share_a_copy(tier: Any) -> None:
    table = {key: {"key": key, "n": i} for i, key in enumerate(ODD_KEYS)}
    source = FunctionSource("odd", table.get)
    for key in ODD_KEYS:
        assert await tier.rows.get(source, key, load=True) == table[key]
    assert await tier.rows.get_many(source, ODD_KEYS) == table


@pytest.mark.parametrize(
    ("row_id", "delay"),
    [
        (None, 1),
        (True, 1),
        (1.5, 1),
        ("", 1),
        ("a\nb", 1),
        ("x" * 1025, 1),
        (b"1", 1),
        (1, float("nan")),
        (1, "5"),
        (1, None),
        (1, 10**9),
    ],
)
async def test_bad_input_is_refused_and_stores_nothing(
    tier: Any, redis_url: str, prefix: str, row_id: Any, delay: Any
) -> None:
    source = FunctionSource("inventory", lambda key: {"id": key})
    with pytest.raises(InvalidInput):
        await tier.rows.schedule(source, row_id, delay)
    if delay == 1:
        with pytest.raises(InvalidInput):
            await tier.rows.get(source, row_id, load=True)
        with pytest.raises(InvalidInput):
            await tier.rows.invalidate(source, row_id)
    assert all_keys(redis_url, f"{prefix}:*") == []


async def test_rows_that_cannot_be_cached_are_refused_others_stored(tier: Any) -> None:
    table = {"ok": {"v": 1}, "bad": {"v": object()}, "tuple": {"v": (1, 2)}}
    source = FunctionSource("mixed", table.get)
    for key in table:
        await tier.rows.schedule(source, key, 60)
    with pytest.raises(SourceError, match="cannot be cached"):
        await tier.rows.refresh_due([source])
    assert await tier.rows.get(source, "ok") == {"v": 1}
    assert await tier.rows.get(source, "bad") is None
    status = await tier.rows.status(source)
    assert (status.scheduled, status.due, status.loading) == (3, 0, 0)  # retried later


async def test_typed_keys_of_declared_tables(tier: Any, database: sa.Engine) -> None:
    meta = sa.MetaData()
    by_uuid = sa.Table(
        "by_uuid", meta, sa.Column("id", sa.Uuid, primary_key=True), sa.Column("v", sa.Integer)
    )
    by_text = sa.Table(
        "by_text", meta, sa.Column("code", sa.String(40), primary_key=True), sa.Column("v", sa.Text)
    )
    meta.create_all(database)
    ident = uuid.UUID("1b4e28ba-2fa1-11d2-883f-0016d3cca427")
    with database.begin() as conn:
        conn.execute(by_uuid.insert(), [{"id": ident, "v": 1}])
        conn.execute(by_text.insert(), [{"code": "A:{b}", "v": "text"}, {"code": "42", "v": "n"}])
    uuids = SqlSource("uuids", by_uuid, key="id", database=database)
    texts = SqlSource("texts", by_text, key="code", columns=("v",), database=database)
    assert await tier.rows.get(uuids, str(ident).upper(), load=True) == {"id": ident, "v": 1}
    assert await tier.rows.get(uuids, ident) == {"id": ident, "v": 1}
    with pytest.raises(InvalidInput):
        await tier.rows.get(uuids, "not-a-uuid")
    assert await tier.rows.get(texts, "A:{b}", load=True) == {"v": "text"}
    assert await tier.rows.get(texts, 42, load=True) == {"v": "n"}


async def test_a_table_named_is_reflected(tier: Any, database: sa.Engine) -> None:
    seed(database)
    source = SqlSource(
        "reflected", "inventory", key="item_id", columns=("name", "stock"), database=database
    )
    row = db_row(database, 11)
    assert row is not None
    assert await tier.rows.get(source, 11, load=True) == {
        "name": row["name"],
        "stock": row["stock"],
    }


@sqlite_only
async def test_the_asyncio_worker_refreshes_rows(
    redis_url: str, prefix: str, database: sa.Engine
) -> None:
    source = seed(database)
    client = webtier.connect_async(redis_url)
    tier = webtier.AsyncWebTier(client, rows_config(prefix, sources=(source,)))
    try:
        for item_id in (1, 2, 3):
            await tier.rows.schedule(source, item_id, 60)
        await AsyncWorker(tier, [JOBS["rows"]], once=True).run()
        assert await tier.rows.get_many(source, [1, 2, 3]) == {
            i: db_row(database, i) for i in (1, 2, 3)
        }
    finally:
        await client.aclose()


@sqlite_only
@pytest.mark.matrix
async def test_warming_loads_only_the_rows_not_cached(tier: Any, database: sa.Engine) -> None:
    source = Instrumented(seed(database, 30))
    await tier.rows.get(source, 2, load=True)
    assert await tier.rows.warm(source, [1, 2, 3, "3", 4]) == 3  # 2 was cached; "3" is 3
    assert source.loads == 2  # the read-through of 2, then one query for 1, 3, 4
    assert await tier.rows.get_many(source, [1, 3, 4]) == {
        i: db_row(database, i) for i in (1, 3, 4)
    }
    assert await tier.rows.warm(source, [1, 2, 3, 4]) == 0
    assert source.loads == 2


@sqlite_only
async def test_a_warming_job_caches_the_rows_of_the_most_viewed_items(
    redis_url: str, prefix: str, database: sa.Engine
) -> None:
    source = Instrumented(seed(database, 50))
    client = webtier.connect_async(redis_url)
    tier = webtier.AsyncWebTier(client, rows_config(prefix))
    try:
        for item, views in ((7, 3), (8, 2), (9, 1), (40, 1)):
            for _ in range(views):
                await tier.ranking.record_view(str(item))
        await AsyncWorker(tier, [warm_rows(source, top=3)], once=True).run()
        cached = await tier.rows.get_many(source, [7, 8, 9, 40])
        assert cached == {7: db_row(database, 7), 8: db_row(database, 8), 9: db_row(database, 9),
                          40: None}  # fmt: skip
        assert source.loads == 1  # the three, with one query
    finally:
        await client.aclose()


def test_a_warming_job_checks_what_it_is_given(database: sa.Engine) -> None:
    source = seed(database)
    for top, every in ((0, 10.0), (10, 0.0), (True, 10.0)):
        with pytest.raises(InvalidInput):
            warm_rows(source, top, every)
    with pytest.raises(InvalidInput):
        warm_rows("inventory", 10)  # type: ignore[arg-type]


# -- a source's origin ------------------------------------------------------------------


def user_inventory(path: Any, stock: int, name: str = "inventory") -> SqlSource:
    """The README's example: a table of the user's own, named ``inventory``."""
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE inventory (item_id INTEGER PRIMARY KEY, stock INT)")
        conn.exec_driver_sql(f"INSERT INTO inventory VALUES (42, {stock})")
    engine.dispose()
    return SqlSource(name, "inventory", key="item_id", database=f"sqlite:///{path}")


@pytest.mark.matrix
@sqlite_only
async def test_a_source_of_the_same_name_on_another_database_is_refused(
    tier: Any, database: sa.Engine, tmp_path: Any
) -> None:
    mine = user_inventory(tmp_path / "mine.db", stock=3)
    theirs = user_inventory(tmp_path / "theirs.db", stock=295)
    await tier.rows.schedule(mine, 42, 60)
    assert await tier.rows.get(mine, 42, load=True) == {"item_id": 42, "stock": 3}
    for use in (
        lambda: tier.rows.get(theirs, 42, load=True),
        lambda: tier.rows.get_many(theirs, [42]),
        lambda: tier.rows.get_many(theirs, [41, 42], load=True),
        lambda: tier.rows.warm(theirs, [41, 42]),
        lambda: tier.rows.schedule(theirs, 42, 60),
        lambda: tier.rows.invalidate(theirs, 42),
        lambda: tier.rows.refresh_now(theirs, 42),
        lambda: tier.rows.refresh_due([theirs]),
    ):
        with pytest.raises(webtier.SourceConflict) as refused:
            await use()
        message = str(refused.value)
        assert "\n" not in message
        assert f"reads sqlite:///{tmp_path / 'theirs.db'} table inventory" in message
        assert f"holds rows of sqlite:///{tmp_path / 'mine.db'} table inventory" in message
    assert await tier.rows.get(mine, 42) == {"item_id": 42, "stock": 3}  # untouched
    # The same file by another spelling of its path is the same database.
    again = SqlSource(
        "inventory", "inventory", key="item_id", database=f"sqlite:///{tmp_path}/./mine.db"
    )
    assert await tier.rows.get(again, 42) == {"item_id": 42, "stock": 3}


@sqlite_only
async def test_a_database_that_gave_no_row_holds_no_name(
    tier: Any, database: sa.Engine, tmp_path: Any
) -> None:
    typo = SqlSource("mine", "inventory", key="item_id", database=f"sqlite:///{tmp_path}/nosuch.db")
    with pytest.raises(SourceError, match="not found"):
        await tier.rows.get(typo, 42, load=True)
    fixed = user_inventory(tmp_path / "mine.db", stock=3, name="mine")
    assert await tier.rows.get(fixed, 42, load=True) == {"item_id": 42, "stock": 3}
    # Rows stored by a batched read-through record the origin too.
    elsewhere = user_inventory(tmp_path / "elsewhere.db", stock=9, name="mine")
    other = user_inventory(tmp_path / "other.db", stock=1, name="other")
    assert await tier.rows.warm(other, [42]) == 1
    for source in (elsewhere, user_inventory(tmp_path / "third.db", stock=2, name="other")):
        with pytest.raises(webtier.SourceConflict):
            await tier.rows.get(source, 42)


@pytest.mark.matrix
@sqlite_only
async def test_the_readme_example_after_the_demo_gets_its_own_rows(
    tier: Any, database: sa.Engine, tmp_path: Any
) -> None:
    shop = seed(database)  # the demo shop's inventory, item 42 among its rows
    await tier.rows.schedule(shop, 42, 60)
    await tier.rows.refresh_due([shop])
    mine = user_inventory(tmp_path / "mine.db", stock=3)
    assert await tier.rows.get_many(mine, [42], load=True) == {42: {"item_id": 42, "stock": 3}}
    await tier.rows.refresh_due([shop])  # the worker of the shop
    assert await tier.rows.get(mine, 42) == {"item_id": 42, "stock": 3}
    assert await tier.rows.get(shop, 42) == db_row(database, 42)
