"""Counters on real Redis: every target, sync and asyncio."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis.cluster
from redis.crc import key_slot

import webtier
from tests.helpers.servers import all_keys
from webtier._core.keys import shard_of
from webtier.config import Config, CounterSettings, Precision
from webtier.errors import InvalidInput

pytestmark = pytest.mark.anyio

NOW = 1_700_000_123.25  # a fixed "now" keeps slices predictable


def slice_of(now: float, precision: int) -> int:
    return int(now // precision) * precision


@pytest.mark.matrix
async def test_record_lands_in_the_slice_of_every_precision(tier: Any) -> None:
    await tier.counters.record("hits:/home", 3, now=NOW)
    await tier.counters.record("hits:/home", 2, now=NOW + 0.5)
    await tier.counters.record("hits:/home", 4, now=NOW + 1)
    for precision in (1, 5, 60, 300, 3600, 18000, 86400):
        samples = await tier.counters.get("hits:/home", precision)
        expected: dict[int, int] = {}
        for at, count in ((NOW, 3), (NOW + 0.5, 2), (NOW + 1, 4)):
            expected[slice_of(at, precision)] = expected.get(slice_of(at, precision), 0) + count
        assert samples == sorted(expected.items()), precision


async def test_counts_may_be_negative_and_zero_records_nothing(
    tier: Any, redis_url: str, prefix: str
) -> None:
    await tier.counters.record("stock", 10, now=NOW)
    await tier.counters.record("stock", -4, now=NOW)
    await tier.counters.record("stock", 2.0, now=NOW)
    assert await tier.counters.get("stock", 86400) == [(slice_of(NOW, 86400), 8)]
    await tier.counters.record("idle", 0, now=NOW)
    assert await tier.counters.names() == ["stock"]
    assert not [k for k in all_keys(redis_url, f"{prefix}:*") if b"idle" in k]


@pytest.mark.parametrize(
    ("name", "count", "now"),
    [
        ("ok", 1.5, NOW),
        ("ok", "1", NOW),
        ("ok", None, NOW),
        ("ok", 2**60, NOW),
        ("ok", 1, -5),
        ("ok", 1, float("nan")),
        ("", 1, NOW),
        ("bad\nname", 1, NOW),
        ("x" * 10_240, 1, NOW),
    ],
)
async def test_bad_input_is_refused_and_stores_nothing(
    tier: Any, redis_url: str, prefix: str, name: str, count: Any, now: float
) -> None:
    with pytest.raises(InvalidInput):
        await tier.counters.record(name, count, now=now)
    assert all_keys(redis_url, f"{prefix}:*") == []


NAMES = [
    "a",
    "a:1",
    "1:a",
    "known",
    "60:a",
    "{a}",
    "{",
    "}",
    "a b",
    "/item/12?color=red",
    "ünïcödé ✓ 页面",
    "x" * 1024,
]


@pytest.mark.matrix
async def test_names_with_any_ordinary_characters_work_and_never_share_data(tier: Any) -> None:
    for index, name in enumerate(NAMES, start=1):
        await tier.counters.record(name, index, now=NOW)
    got = await tier.counters.get_many(NAMES, 60)
    assert got == {name: [(slice_of(NOW, 60), i)] for i, name in enumerate(NAMES, start=1)}
    assert await tier.counters.names() == sorted(NAMES)


async def test_names_filters_by_prefix(tier: Any) -> None:
    for name in ["page:/a", "page:/b", "api:/x"]:
        await tier.counters.record(name, now=NOW)
    assert await tier.counters.names("page:") == ["page:/a", "page:/b"]


async def test_get_reads_a_time_range(tier: Any) -> None:
    for offset in range(5):
        await tier.counters.record("r", offset + 1, now=NOW + offset)
    base = slice_of(NOW, 1)
    assert await tier.counters.get("r", 1, start=base + 1, end=base + 3) == [
        (base + 1, 2),
        (base + 2, 3),
        (base + 3, 4),
    ]


async def test_unknown_counter_reads_empty_and_unknown_precision_is_refused(tier: Any) -> None:
    assert await tier.counters.get("never", 60) == []
    with pytest.raises(InvalidInput, match="precision"):
        await tier.counters.get("never", 7)


@pytest.mark.matrix
async def test_only_the_newest_slices_are_kept_even_without_a_cleaner(
    tier_factory: Any, prefix: str
) -> None:
    tier = tier_factory(Config(prefix=prefix, counters=CounterSettings.of((1, 5), samples=4)))
    for second in range(10):
        await tier.counters.record("c", second + 1, now=NOW + second)
    base = slice_of(NOW, 1)
    assert await tier.counters.get("c", 1) == [(base + s, s + 1) for s in range(6, 10)]
    # A late write to a slice older than the newest four is dropped at once.
    await tier.counters.record("c", 100, now=NOW - 60)
    assert await tier.counters.get("c", 1) == [(base + s, s + 1) for s in range(6, 10)]


@pytest.mark.matrix
async def test_every_key_expires_by_itself(tier: Any, redis_url: str, prefix: str) -> None:
    await tier.counters.record("ttl", now=time.time())
    client = webtier.connect(redis_url)
    try:
        keys = all_keys(redis_url, f"{prefix}:*")
        assert len(keys) == 8  # 7 precisions + the shard's index
        for key in keys:
            ttl = client.pttl(key)
            assert 0 < ttl <= (120 * 86400 + 60) * 1000, key
    finally:
        webtier.disconnect(client)


@pytest.mark.matrix
async def test_the_index_forgets_names_whose_data_all_expired(
    tier: Any, redis_url: str, prefix: str
) -> None:
    await tier.counters.record("fresh", now=NOW)
    shard = shard_of("fresh", 64)
    index = f"{prefix}:{{c:{shard}}}:known"
    client = webtier.connect(redis_url)
    try:
        client.zadd(index, {"ancient": 0})  # registered in 1970: long expired
        await tier.counters.record("fresh", now=NOW + 1)  # a new slice: the index is pruned
        assert client.zrange(index, 0, -1) == [b"fresh"]
    finally:
        webtier.disconnect(client)


@pytest.mark.matrix
async def test_clean_drops_old_slices_and_unlists_empty_counters(
    tier_factory: Any, prefix: str
) -> None:
    tier = tier_factory(Config(prefix=prefix, counters=CounterSettings.of((1, 60), samples=10)))
    await tier.counters.record("old", 1, now=NOW)
    await tier.counters.record("mixed", 1, now=NOW)
    await tier.counters.record("mixed", 1, now=NOW + 100)
    report = await tier.counters.clean(now=NOW + 105)
    # cutoff: 1 s slices at or before now-10 go; 60 s slices at or before now-600 go.
    assert await tier.counters.get("old", 1) == []
    assert await tier.counters.get("old", 60) == [(slice_of(NOW, 60), 1)]
    assert await tier.counters.get("mixed", 1) == [(slice_of(NOW + 100, 1), 1)]
    assert report.samples_dropped == 2
    assert report.counters_unlisted == 0
    report = await tier.counters.clean(now=NOW + 10_000)
    assert report.counters_unlisted == 2
    assert await tier.counters.names() == []


async def test_clean_respects_the_schedule_of_slow_precisions(
    tier_factory: Any, prefix: str
) -> None:
    tier = tier_factory(Config(prefix=prefix, counters=CounterSettings.of((1, 300), samples=2)))
    await tier.counters.record("c", 1, now=NOW)
    # Pass 1 is not a 5-minute pass: the 300 s slice survives a far cutoff.
    await tier.counters.clean(pass_number=1, now=NOW + 10_000)
    assert await tier.counters.get("c", 300) == [(slice_of(NOW, 300), 1)]
    assert await tier.counters.names() == ["c"]
    await tier.counters.clean(pass_number=5, now=NOW + 10_000)
    assert await tier.counters.get("c", 300) == []
    assert await tier.counters.names() == []


@pytest.mark.matrix
async def test_scripts_are_reloaded_after_a_script_flush(tier: Any, redis_url: str) -> None:
    await tier.counters.record("s", now=NOW)
    client = webtier.connect(redis_url)
    try:
        if isinstance(client, redis.cluster.RedisCluster):
            client.execute_command(
                "SCRIPT FLUSH", target_nodes=redis.cluster.RedisCluster.ALL_NODES
            )
        else:
            client.script_flush()
    finally:
        webtier.disconnect(client)
    await tier.counters.record("s", now=NOW)
    assert await tier.counters.get("s", 1) == [(slice_of(NOW, 1), 2)]


@pytest.mark.onlycluster
async def test_the_index_is_spread_over_every_master(
    tier: Any, redis_url: str, prefix: str
) -> None:
    for i in range(200):
        await tier.counters.record(f"page:/item/{i}", now=NOW)
    client = webtier.connect(redis_url)
    try:
        owners = {
            client.nodes_manager.get_node_from_slot(key_slot(key)).name
            for key in all_keys(redis_url, f"{prefix}:*:known")
        }
        assert len(owners) == len(client.get_primaries()) == 3
    finally:
        webtier.disconnect(client)
    assert len(await tier.counters.names()) == 200


async def test_settings_with_custom_precisions_and_samples(tier_factory: Any, prefix: str) -> None:
    settings = CounterSettings(precisions=(Precision(10, 3), Precision(3600, 24)))
    tier = tier_factory(Config(prefix=prefix, counters=settings))
    await tier.counters.record("c", 5, now=NOW)
    assert await tier.counters.get("c", 10) == [(slice_of(NOW, 10), 5)]
    assert await tier.counters.get("c", 3600) == [(slice_of(NOW, 3600), 5)]
