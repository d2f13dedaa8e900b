"""Memory stays bounded with no worker running: every key webtier writes
expires by itself, or is listed below (and in docs/keys.md) with what bounds
it instead.

One test writes through every public API of the tier under a fresh prefix,
with no worker running, then reads the ``TTL`` of every key under the prefix
(on every master of a cluster); then it runs one pass of every worker job
and looks again. Every key must also belong to a known family: a new kind
of key fails here until it is listed, with its TTL or its bound.
"""

from __future__ import annotations

import re
import time
from typing import Any

import anyio
import pytest
import sqlalchemy as sa

import webtier
from tests.helpers.ops import run_op
from tests.helpers.rows import seed, take_load
from tests.helpers.servers import all_keys, run_script
from webtier import pagecache
from webtier._core.protocol import Call, ScriptCall
from webtier.config import Config, RowSettings
from webtier.errors import SourceError
from webtier.pagecache import BOOK_RULES, CacheRoute, PageRequest, PageRules
from webtier.rows import FunctionSource
from webtier.types import Rendered
from webtier.workers import AsyncWorker, Worker, liveness

pytestmark = pytest.mark.anyio

# Every family of keys webtier writes, by the key after "<prefix>:".
FAMILIES: dict[str, str] = {
    "counter index": r"\{c:\d+\}:known",
    "counter samples": r"\{c:\d+\}:\d+:.+",
    "stats record": r"\{s:\d+\}:\d+:\d+:[A-Za-z][A-Za-z0-9_.-]*:.+",
    "stats contexts": r"\{s:\d+\}:ctx:\d+:\d+:[A-Za-z][A-Za-z0-9_.-]*",
    "session": r"\{s:\d+\}:t:[A-Za-z0-9_-]+",
    "session index": r"\{s:\d+\}:recent",
    "user's sessions": r"\{u:\d+\}:.+",
    "row schedule": r"\{r:[A-Za-z0-9_.-]+:\d+\}:due",
    "row delays": r"\{r:[A-Za-z0-9_.-]+:\d+\}:delay",
    "row loads": r"\{r:[A-Za-z0-9_.-]+:\d+\}:fill",
    "row leases": r"\{r:[A-Za-z0-9_.-]+:\d+\}:lease",
    "row failures": r"\{r:[A-Za-z0-9_.-]+:\d+\}:fail",
    "row tickets": r"\{r:[A-Za-z0-9_.-]+:\d+\}:seq",
    "row copy": r"\{r:[A-Za-z0-9_.-]+:\d+\}:row:.+",
    "row source origin": r"\{r:[A-Za-z0-9_.-]+:0\}:origin",
    # One shard: the book's {v}; several: {v:<shard>:<n>} (keys.ranking_tag).
    "ranking": r"\{v(:\d+:\d+)?\}:viewed",
    "ranking fence": r"\{v(:\d+:\d+)?\}:rescaled",
    "page": r"\{pc:\d+\}:page:[0-9a-f]+",
    "page lock": r"\{pc:\d+\}:lock:[0-9a-f]+",
    "page generation": r"\{pc:\d+\}:gen",
    "page index": r"\{pc:\d+\}:pages",
    "item's pages": r"\{pc:\d+\}:item:.+",
    "worker": r"\{w\}:alive:.+",
    "workers": r"\{w\}:all",
    "deployment settings": r"\{meta\}:settings",
}

# The families whose keys may have no TTL, and what bounds them instead:
# the list docs/keys.md shows.
BOUNDED: dict[str, str] = {
    "row schedule": "one entry per row scheduled, until unscheduled or deleted in the database",
    "row delays": "one entry per row scheduled, until unscheduled or deleted in the database",
    "row copy": "a scheduled row's copy (checked: the row is in its schedule), one per row",
    "row source origin": "one short string per row source name, once its first rows are stored",
    "deployment settings": "one short string per prefix, which outlives the keys it describes",
}

PATTERNS = {name: re.compile(pattern) for name, pattern in FAMILIES.items()}
PAGE = Rendered(200, (("content-type", "text/plain"), ("content-length", "4")), b"page", 300.0)


def family(rest: str) -> str:
    found = [name for name, pattern in PATTERNS.items() if pattern.fullmatch(rest)]
    assert len(found) == 1, f"key {rest!r} is of families {found}: list it in FAMILIES"
    return found[0]


def check_keyspace(redis_url: str, prefix: str) -> set[str]:
    """Check the TTL of every key under ``prefix``; returns the families seen."""
    seen: set[str] = set()
    unbounded: list[str] = []
    client = webtier.connect(redis_url)
    try:
        for key in all_keys(redis_url, f"{prefix}:*"):
            rest = key.decode()[len(prefix) + 1 :]
            name = family(rest)
            seen.add(name)
            ttl = client.pttl(key)
            if ttl > 0 or ttl == -2:  # expiring, or expired since the scan
                continue
            if name == "row copy":
                route, row_id = key.decode().split(":row:", 1)
                if client.zscore(f"{route}:due", row_id) is None:
                    unbounded.append(f"{rest} (a copy of an unscheduled row)")
            elif name not in BOUNDED:
                unbounded.append(rest)
    finally:
        webtier.disconnect(client)
    assert not unbounded, f"keys without a TTL or a listed bound: {unbounded}"
    return seen


def plan_of(config: Config, url: str, rules: PageRules) -> Any:
    plan = rules.plan(config, PageRequest.from_url(url))
    assert plan is not None
    return plan


async def write_counters_and_stats(tier: Any, api: str) -> None:
    await tier.counters.record("views:/")
    await tier.counters.record("stock:42", -3)
    await tier.stats.record("/checkout", "BasketSize", 3)
    if api == "sync":
        recorder = await tier.counters.recorder(flush_interval=3600)
        with recorder:
            recorder.incr("hot", 2)
        with await tier.stats.access_time("/item/{id}"):
            pass
        with await tier.stats.recorder(flush_interval=3600) as stats:
            stats.record("/batched/{id}", "AccessTime", 0.01)
            stats.record("/checkout", "Revenue", 12.5)
    else:
        async with tier.counters.recorder(flush_interval=3600) as recorder:
            recorder.incr("hot", 2)
        async with tier.stats.access_time("/item/{id}"):
            pass
        async with tier.stats.recorder(flush_interval=3600) as stats:
            stats.record("/batched/{id}", "AccessTime", 0.01)
            stats.record("/checkout", "Revenue", 12.5)


async def write_ranking(tier: Any, api: str) -> None:
    for item in ("42", "42", "7"):
        await tier.ranking.record_view(item)
    if api == "sync":
        with await tier.ranking.aggregator(flush_interval=3600):
            await tier.ranking.record_view("9")
    else:
        async with tier.ranking.aggregator(flush_interval=3600):
            await tier.ranking.record_view("9")


async def write_sessions(tier: Any) -> None:
    token = await tier.sessions.new()
    assert await tier.sessions.touch(token, item="42")
    await tier.carts.set(token, "42", 2)
    await tier.sessions.update(token, {"theme": "dark"})
    token = (await tier.sessions.login(token, "alice")).token
    assert await tier.sessions.touch(token, item="7")
    await tier.sessions.new("bob")
    gone = await tier.sessions.new()
    await tier.sessions.logout(gone)
    # A framework's sessions (Django's, Flask's, starsessions'): their own expiry.
    framed = webtier.sessions.new_token()
    assert await tier.session_store.create(framed, {"a": 1}, expiry=600)
    assert await tier.session_store.save(framed, {"b": 2}, expiry=1200)
    assert await tier.session_store.rotate(framed) is not None
    assert await tier.session_store.create(webtier.sessions.new_token(), expiry=None, blob=b"x")
    assert len(await tier.sessions.of_user("alice")) == 1


async def write_pages(tier: Any, config: Config, redis_url: str) -> None:
    rules = PageRules(routes=(CacheRoute("/hot"), CacheRoute("/cold")))
    hot = plan_of(config, "http://shop.test/hot", rules)
    item = plan_of(config, "http://shop.test/item?item=42", BOOK_RULES)  # 42 was viewed
    render = Call(lambda: PAGE)
    for plan in (hot, item):
        assert (await tier.pagecache.serve(plan, render)).outcome == "MISS"
    await tier.pagecache.invalidate("http://shop.test/hot", rules=rules)
    await tier.pagecache.invalidate_item("42")
    await tier.pagecache.invalidate_all()
    for plan in (hot, item):
        assert (await tier.pagecache.serve(plan, render)).outcome == "MISS"
    # A render holder that died holding its lock.
    cold = plan_of(config, "http://shop.test/cold", rules)
    shard = cold.shard
    keys = (shard.page(cold.digest), shard.lock(cold.digest), shard.gen)
    run_script(redis_url, ScriptCall(pagecache.ops.CLAIM, keys, ("miss", "dead", 60_000)))


async def write_rows(
    tier: Any, config: Config, redis_url: str, source: Any, broken: FunctionSource
) -> None:
    await tier.rows.schedule(source, 1, 60)
    await tier.rows.refresh_now(source, 1)  # a scheduled row's copy
    await tier.rows.schedule(source, 6, 60)
    await tier.rows.unschedule(source, 6)
    for row_id in (2, 3, 999):  # copies of unscheduled rows, and a missing row
        await tier.rows.get(source, row_id, load=True)
    await tier.rows.invalidate(source, 3)
    await tier.rows.refresh_now(source, 4)
    take_load(redis_url, config, "5", 60_000)  # a reader that died mid-load
    await tier.rows.schedule(broken, 1, 60)
    with pytest.raises(SourceError):
        await tier.rows.get(broken, 1, load=True)  # counted as failing


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
@pytest.mark.matrix
async def test_every_key_expires_or_is_listed_with_its_bound(
    tier_factory: Any, api: str, prefix: str, redis_url: str, database: sa.Engine
) -> None:
    source = seed(database)
    broken = FunctionSource("broken", lambda key: 1 / 0)  # type: ignore[arg-type,return-value]
    config = Config(prefix=prefix, rows=RowSettings(sources=(source,), shards=4))
    tier = tier_factory(config)

    # No worker has ever run; the app checked the deployment's settings at startup.
    await tier.deployment.check()
    await write_counters_and_stats(tier, api)
    await write_ranking(tier, api)
    await write_sessions(tier)
    await write_pages(tier, config, redis_url)
    await write_rows(tier, config, redis_url, source, broken)
    # A worker that beat once, then died without retiring.
    info = liveness.WorkerInfo("dead", "host", 1, time.time(), ("rows",), time.time())
    await run_op(tier, liveness.heartbeat(config, info, 15.0))
    seen = check_keyspace(redis_url, prefix)
    transient = {"ranking fence"}  # written by the rescale, a worker's job
    assert set(FAMILIES) - seen == transient, "some writes above left no key"

    # One pass of every worker job, then the worker retires.
    if api == "sync":
        await anyio.to_thread.run_sync(Worker(tier._wrapped, once=True).run)
    else:
        await AsyncWorker(tier, once=True).run()
    assert "ranking fence" in check_keyspace(redis_url, prefix)
