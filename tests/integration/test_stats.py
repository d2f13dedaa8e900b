"""Statistics on real Redis: every target, sync and asyncio."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import replace
from typing import Any

import anyio
import pytest
from redis.crc import key_slot

import webtier
from tests.helpers.servers import all_keys
from webtier.config import Clock, Config, StatsSettings
from webtier.errors import InvalidInput
from webtier.stats.histogram import Histogram

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("steady_hour")]

ACCESS = "AccessTime"


def server_time(url: str) -> float:
    client = webtier.connect(url)
    try:
        seconds, micros = client.time()  # type: ignore[misc]
        return float(seconds) + micros / 1e6
    finally:
        webtier.disconnect(client)


@pytest.mark.matrix
async def test_record_keeps_the_books_figures_and_percentiles(tier: Any) -> None:
    values = [0.012, 0.020, 0.031, 0.045, 0.5, 0.013, 0.017, 0.022, 0.019, 0.250]
    for i, value in enumerate(values):
        recorded = await tier.stats.record("/item/{id}", ACCESS, value)
        assert recorded.count == i + 1
        assert recorded.sum == pytest.approx(sum(values[: i + 1]))
        assert recorded.sumsq == pytest.approx(sum(v * v for v in values[: i + 1]))
    summary = await tier.stats.get("/item/{id}", ACCESS)
    assert (summary.count, summary.min, summary.max, summary.errors) == (10, 0.012, 0.5, 0)
    assert summary.sum == pytest.approx(sum(values))
    assert summary.mean == pytest.approx(statistics.fmean(values))
    assert summary.stddev == pytest.approx(statistics.stdev(values))
    assert summary.periods == 1
    exact = Histogram.of(values, summary.histogram.sub_buckets)
    assert dict(summary.histogram.counts) == dict(exact.counts)
    for percent in (50, 90, 99):
        ordered = sorted(values)
        true = ordered[math.ceil(percent * len(values) / 100) - 1]
        assert summary.percentile(percent) == pytest.approx(true, rel=0.02)


async def test_large_values_keep_their_spread(tier: Any) -> None:
    values = [1e9 + d for d in (1, 2, 3, 4)] * 5
    for value in values:
        await tier.stats.record("big", "Revenue", value)
    summary = await tier.stats.get("big", "Revenue")
    # Welford's error grows with mean / stddev (here 1e9): 1e-7 at worst. The
    # book's sumsq - sum**2 / count loses every digit (see the unit test).
    assert summary.stddev == pytest.approx(statistics.stdev(values), rel=1e-6)
    assert summary.sum == sum(values)


async def test_negative_values_where_the_type_allows_them(tier: Any) -> None:
    for value in (-5, 0, 3.5):
        await tier.stats.record("stock", "Delta", value)
    summary = await tier.stats.get("stock", "Delta")
    assert (summary.min, summary.max, summary.count) == (-5.0, 3.5, 3)
    assert summary.percentile(1) == pytest.approx(-5.0, rel=0.02)
    assert summary.percentile(50) == 0.0


@pytest.mark.parametrize(
    ("context", "stat_type", "value"),
    [
        ("/a", ACCESS, -0.001),
        ("/a", ACCESS, math.nan),
        ("/a", "Size", math.inf),
        ("/a", "Size", "12"),
        ("/a", "Size", None),
        ("/a", "Size", 1e300),
        ("/a", "a:b", 1.0),
        ("", ACCESS, 1.0),
        ("bad\x00name", ACCESS, 1.0),
        ("x" * 1025, ACCESS, 1.0),
    ],
)
async def test_bad_input_is_refused_and_stores_nothing(
    tier: Any, redis_url: str, prefix: str, context: Any, stat_type: Any, value: Any
) -> None:
    with pytest.raises(InvalidInput):
        await tier.stats.record(context, stat_type, value)
    assert all_keys(redis_url, f"{prefix}:*") == []


CONTEXTS = ["/", "/item/{id}", "{", "}", "a:b", "3600:1:AccessTime:x", "slow", "页面 ✓", "x" * 1024]


@pytest.mark.matrix
async def test_contexts_never_share_data_and_read_together(tier: Any) -> None:
    for i, context in enumerate(CONTEXTS, start=1):
        await tier.stats.record(context, ACCESS, float(i))
    got = await tier.stats.get_many([*CONTEXTS, "never"], ACCESS)
    assert list(got) == [*CONTEXTS, "never"]
    for i, context in enumerate(CONTEXTS, start=1):
        assert (got[context].count, got[context].sum) == (1, float(i)), context
    assert got["never"].count == 0
    assert got["never"].mean is None


async def test_types_of_one_context_are_apart(tier: Any) -> None:
    await tier.stats.record("/cart", ACCESS, 0.5)
    await tier.stats.record("/cart", "Items", 3)
    assert (await tier.stats.get("/cart", ACCESS)).sum == 0.5
    assert (await tier.stats.get("/cart", "Items")).sum == 3


async def test_failures_are_counted_apart(tier: Any) -> None:
    await tier.stats.record("/pay", ACCESS, 0.1)
    await tier.stats.record("/pay", ACCESS, 0.3, failed=True)
    summary = await tier.stats.get("/pay", ACCESS)
    assert (summary.count, summary.errors) == (2, 1)


async def test_periods_roll_over_on_the_servers_clock_and_merge(
    tier_factory: Any, prefix: str, redis_url: str
) -> None:
    settings = StatsSettings(period=1, keep=5)
    tier = tier_factory(Config(prefix=prefix, stats=settings))
    # Start just after a second turns, so both writes fit in their second.
    await anyio.sleep(1.05 - server_time(redis_url) % 1)
    first = await tier.stats.record("/", ACCESS, 1.0)
    await tier.stats.record("/", ACCESS, 3.0)
    await anyio.sleep(1.0)
    second = await tier.stats.record("/", ACCESS, 10.0)
    assert second.start == first.start + 1
    assert (second.count, second.sum) == (1, 10.0)  # the first write of a period starts it

    current = await tier.stats.get("/", ACCESS)
    assert (current.count, current.start) == (1, second.start)
    both = await tier.stats.get("/", ACCESS, periods=2)
    assert (both.count, both.sum, both.min, both.max, both.periods) == (3, 14.0, 1.0, 10.0, 2)
    assert both.stddev == pytest.approx(statistics.stdev([1.0, 3.0, 10.0]))
    series = await tier.stats.series("/", ACCESS, periods=3)
    assert [(s.start, s.count) for s in series] == [
        (first.start - 1, 0),
        (first.start, 2),
        (second.start, 1),
    ]


@pytest.mark.matrix
async def test_every_key_expires_by_itself(tier_factory: Any, prefix: str, redis_url: str) -> None:
    tier = tier_factory(Config(prefix=prefix, stats=StatsSettings(period=60, keep=2)))
    recorded = await tier.stats.record("/", ACCESS, 0.1)
    client = webtier.connect(redis_url)
    try:
        keys = all_keys(redis_url, f"{prefix}:*")
        assert len(keys) == 2  # the record and its ranking
        # Both live until `keep` newer periods have passed after their own.
        left = (recorded.start + 3 * 60) * 1000 - server_time(redis_url) * 1000
        for key in keys:
            assert abs(client.pttl(key) - left) < 1000, key
    finally:
        webtier.disconnect(client)


async def test_slowest_ranks_contexts_exactly_by_mean(tier_factory: Any, prefix: str) -> None:
    tier = tier_factory(Config(prefix=prefix, stats=StatsSettings(shards=4)))
    for i in range(8):
        mean = (i + 1) / 100
        await tier.stats.record(f"/page/{i}", ACCESS, mean * 0.5)
        await tier.stats.record(f"/page/{i}", ACCESS, mean * 1.5)
    slowest = await tier.stats.slowest(3)
    assert [c for c, _ in slowest] == ["/page/7", "/page/6", "/page/5"]
    assert [s for _, s in slowest] == pytest.approx([0.08, 0.07, 0.06])
    assert await tier.stats.slowest(1) == slowest[:1]
    # A slow context turned fast drops out (the book's trimmed zset keeps a
    # context trimmed while fast out for good, and a stale score otherwise).
    for _ in range(30):
        await tier.stats.record("/page/7", ACCESS, 0.001)
    assert [c for c, _ in await tier.stats.slowest(3)] == ["/page/6", "/page/5", "/page/4"]
    by_max = await tier.stats.slowest(1, by="max")
    assert by_max == [("/page/7", pytest.approx(0.12))]
    # Unranked types are not listed.
    await tier.stats.record("/page/0", "Items", 1e6)
    assert len(await tier.stats.slowest(100)) == 8


@pytest.mark.matrix
async def test_the_listing_of_contexts_is_bounded(
    tier_factory: Any, prefix: str, redis_url: str
) -> None:
    settings = StatsSettings(rank_limit=3, shards=1)
    tier = tier_factory(Config(prefix=prefix, stats=settings))
    for i in range(8):
        await tier.stats.record(f"/page/{i}", ACCESS, i + 1)
    (listing,) = all_keys(redis_url, f"{prefix}:*:ctx:*")
    client = webtier.connect(redis_url)
    try:
        assert client.scard(listing) == 3  # whatever names callers invent
    finally:
        webtier.disconnect(client)
    assert [c for c, _ in await tier.stats.slowest(10)] == ["/page/2", "/page/1", "/page/0"]
    assert (await tier.stats.get("/page/7", ACCESS)).count == 1  # recorded all the same


@pytest.mark.matrix
async def test_slowest_by_a_percentile_spans_shards(tier_factory: Any, prefix: str) -> None:
    tier = tier_factory(Config(prefix=prefix, stats=StatsSettings(shards=16)))
    # /steady is slower on average, /spiky has the worse tail.
    for i in range(100):
        await tier.stats.record("/steady", ACCESS, 0.1)
        await tier.stats.record("/spiky", ACCESS, 0.5 if i % 10 == 0 else 0.01)
    assert [c for c, _ in await tier.stats.slowest(2)] == ["/steady", "/spiky"]
    (first, p95), (second, _) = await tier.stats.slowest(2, by="p95")
    assert (first, second) == ("/spiky", "/steady")
    assert p95 == pytest.approx(0.5, rel=0.02)
    assert p95 == (await tier.stats.get("/spiky", ACCESS)).percentile(95)


async def test_slowest_over_several_periods_scores_them_merged(
    tier_factory: Any, prefix: str, redis_url: str
) -> None:
    # One-second periods: on a loaded machine a step can slip into the next
    # period, so the scenario is retried (on fresh keys) until it ran as planned.
    for attempt in range(10):
        tier = tier_factory(
            Config(prefix=f"{prefix}-{attempt}", stats=StatsSettings(period=1, keep=3))
        )
        await anyio.sleep(1.05 - server_time(redis_url) % 1)
        first = [
            await tier.stats.record(context, ACCESS, value)
            for context, value in (("/a", 0.9), ("/b", 0.5), ("/gone", 2.0))
        ]
        await anyio.sleep(1.0)
        second = [await tier.stats.record("/a", ACCESS, 0.1) for _ in range(3)]
        second.append(await tier.stats.record("/b", ACCESS, 0.5))
        current = await tier.stats.slowest(3)
        merged = await tier.stats.slowest(3, periods=2)
        starts = {r.start for r in first}, {r.start for r in second}
        read_in = int(server_time(redis_url))
        if (
            len(starts[0]) == len(starts[1]) == 1
            and min(starts[1]) == min(starts[0]) + 1 == read_in
        ):
            break
    else:
        pytest.fail("the machine was too slow to keep one-second periods apart")
    assert [c for c, _ in current] == ["/b", "/a"]
    assert merged == [
        ("/gone", pytest.approx(2.0)),
        ("/b", pytest.approx(0.5)),
        ("/a", pytest.approx(0.3)),
    ]


@pytest.mark.matrix
async def test_skewed_client_clocks_write_into_the_servers_period(
    tier_factory: Any, redis_url: str, config: Config
) -> None:
    starts = set()
    for skew in (-7200.0, -1800.0, -1.5, 0.0, 0.5, 1800.0, 86400.0):
        tier = tier_factory(replace(config, clock=Clock(wall=lambda skew=skew: time.time() + skew)))
        before = server_time(redis_url)
        recorded = await tier.stats.record("/", ACCESS, 1.0)
        after = server_time(redis_url)
        assert int(before // 3600) * 3600 <= recorded.start <= after
        starts.add(recorded.start)
    if len(starts) == 1:  # the hour did not turn during the test
        tier = tier_factory(replace(config, clock=Clock(wall=lambda: time.time() - 5400)))
        assert (await tier.stats.get("/", ACCESS)).count == 7  # readers are corrected too


@pytest.mark.onlycluster
async def test_contexts_spread_over_every_master(tier: Any, redis_url: str, prefix: str) -> None:
    contexts = [f"/page/{i}" for i in range(64)]
    for context in contexts:
        await tier.stats.record(context, ACCESS, 0.01)
    client = webtier.connect(redis_url)
    try:
        owners = {
            client.nodes_manager.get_node_from_slot(key_slot(key)).name
            for key in all_keys(redis_url, f"{prefix}:*")
        }
    finally:
        webtier.disconnect(client)
    assert len(owners) == 3
    assert len(await tier.stats.slowest(100)) == 64
    assert all(s.count == 1 for s in (await tier.stats.get_many(contexts, ACCESS)).values())
