"""The view ranking split over shards: exact reads against one zset, the
spread of view writes over a Cluster's slots and masters, the rescale per
shard, and the shard count as a deployment setting."""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.crc import key_slot

import webtier
from tests.helpers.servers import ranking_scores
from webtier import ranking
from webtier._core.keys import item_shard
from webtier.config import CLUSTER_RANKING_SHARDS, Config, RankingSettings
from webtier.errors import SettingsMismatch

WEEK = 7 * 86400
# Names that tie often (few views each) and sort differently as bytes and
# as text, spread over the shards by their CRC-32.
ITEMS = [f"item:{k}" for k in range(12)] + ["a", "ab", "b", "é", "\u00ff", "z{x}"]


def sharded(prefix: str, shards: int, **ranking: Any) -> Config:
    return Config(prefix=prefix, ranking=RankingSettings(shards=shards, **ranking))


def in_order(scores: dict[str, float], shards: int) -> list[str]:
    """The documented order of a ranking of ``shards`` shards: most views
    first; equal views by shard number, then by name's bytes, descending (a
    zset's ZREVRANGE order within one shard)."""
    return sorted(
        scores,
        key=lambda item: (scores[item], -item_shard(item, shards), item.encode()),
        reverse=True,
    )


def reference_scores(client: Any, key: str) -> dict[str, float]:
    return {item.decode(): score for item, score in client.zrange(key, 0, -1, withscores=True)}


VIEWS = st.lists(
    st.tuples(st.sampled_from(ITEMS), st.integers(1, 3), st.booleans()), min_size=1, max_size=40
)


@pytest.mark.matrix
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(views=VIEWS, shards=st.sampled_from([1, 2, 3, CLUSTER_RANKING_SHARDS]), halve=st.booleans())
def test_top_and_rank_equal_one_zset_fed_the_same_views(
    redis_url: str, views: list[tuple[str, int, bool]], shards: int, halve: bool
) -> None:
    prefix = f"h{uuid.uuid4().hex[:10]}"
    reference = f"{prefix}:{{ref}}:viewed"  # one zset, fed the same views
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, sharded(prefix, shards, interval=WEEK))
    try:
        aggregated = [(item, count) for item, count, by_flush in views if by_flush]
        for item, count, by_flush in views:
            if not by_flush:
                for _ in range(count):
                    tier.ranking.record_view(item)
            client.zincrby(reference, count, item)
        with tier.ranking.aggregator(flush_interval=3600) as aggregator:
            for item, count in aggregated:  # one flush, one request per shard
                aggregator.incr(item, count)
        if halve:
            assert tier.ranking.rescale().shards == shards
            client.zinterstore(reference, {reference: 0.5})
        scores = reference_scores(client, reference)
        assert ranking_scores(client, tier.config) == scores
        expected = in_order(scores, shards)
        for n in (1, 3, len(expected), len(expected) + 5):
            assert tier.ranking.top(n) == [(item, scores[item]) for item in expected[:n]]
            assert [item for item, _ in tier.ranking.top(n)] == expected[:n]
        for place, item in enumerate(expected):
            assert tier.ranking.rank(item) == place
        assert tier.ranking.rank("never viewed") is None
        with tier.ranking.top_items(len(expected) + 1, refresh=3600) as top:
            assert top.refresh_now()
            assert [top.rank(item) for item in expected] == list(range(len(expected)))
    finally:
        client.delete(reference)
        webtier.disconnect(client)


@pytest.mark.matrix
def test_top_n_reads_again_only_shards_that_hold_more_of_the_top(
    redis_url: str, prefix: str
) -> None:
    """Every item of the top in one shard: the merge must read it past its
    first share (the second round), and the result is still exact."""
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, sharded(prefix, 4))
    try:
        crowded = [f"i{k}" for k in range(400) if item_shard(f"i{k}", 4) == 2][:30]
        for views, item in enumerate(crowded, start=10):
            client.zadd(ranking.ops.shard_for(tier.config, item).viewed, {item: views})
        client.zadd(ranking.ops.shard_for(tier.config, "other").viewed, {"other": 1})
        expected = [(item, float(v)) for v, item in reversed(list(enumerate(crowded, start=10)))]
        assert tier.ranking.top(25) == expected[:25]
        assert tier.ranking.top(31) == [*expected, ("other", 1.0)]
    finally:
        webtier.disconnect(client)


@pytest.mark.anyio
@pytest.mark.matrix
async def test_a_touch_counts_its_view_in_the_items_shard(
    tier_factory: Any, prefix: str, redis_url: str
) -> None:
    """On a single server in the touch's own script (given the shard's key),
    on Cluster in the touch chain's view step."""
    tier = tier_factory(sharded(prefix, 3))
    token = await tier.sessions.new()
    for item in ITEMS:
        assert await tier.sessions.touch(token, item=item)
    client = webtier.connect(redis_url)
    try:
        assert ranking_scores(client, tier.config) == dict.fromkeys(ITEMS, 1.0)
    finally:
        webtier.disconnect(client)
    expected = in_order(dict.fromkeys(ITEMS, 1.0), 3)
    assert await tier.ranking.top(len(ITEMS)) == [(item, 1.0) for item in expected]


# -- the spread over a Cluster ---------------------------------------------------------------


def zincrby_calls(client: Any) -> dict[str, int]:
    """ZINCRBY calls so far, per master (INFO commandstats)."""
    calls = {}
    for node in client.get_primaries():
        stats = client.info("commandstats", target_nodes=node)
        calls[node.name] = int(stats.get("cmdstat_zincrby", {}).get("calls", 0))
    return calls


@pytest.mark.onlycluster
@pytest.mark.matrix
def test_view_writes_spread_over_slots_and_masters_on_a_cluster(
    redis_url: str, prefix: str
) -> None:
    """The default on Cluster: 12 shards, 4 on each of 3 masters. Every
    view of 6,000 distinct items (a view per item, so the hash alone
    decides): no slot takes more than 1/12 of the view writes beyond the
    hash's statistical margin, and no master more than 1/3."""
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, Config(prefix=prefix))
    try:
        shards = ranking.ops.shards_of(tier.config)
        assert len(shards) == CLUSTER_RANKING_SHARDS
        owners = {s.viewed: client.get_node_from_key(s.viewed).name for s in shards}
        slots = [key_slot(shard.viewed.encode()) for shard in shards]
        assert len(set(slots)) == len(shards)  # each shard its own slot
        assert sorted(Counter(owners.values()).values()) == [4, 4, 4]  # even over the masters

        before = zincrby_calls(client)
        token = tier.sessions.new()
        views = 6000
        for k in range(views):
            if k % 2:
                tier.sessions.touch(token, item=f"item:{k}")  # the touch's view step
            else:
                tier.ranking.record_view(f"item:{k}")
        after = zincrby_calls(client)

        # Writes per slot, counted twice: each shard's views (one key per
        # slot, every view +1), and each master's ZINCRBY calls.
        per_slot: dict[int, int] = {}
        per_master: Counter[str] = Counter()
        for shard in shards:
            found = client.zrange(shard.viewed, 0, -1, withscores=True)
            count = int(sum(score for _, score in found))
            per_slot[key_slot(shard.viewed.encode())] = count
            per_master[owners[shard.viewed]] += count
        assert sum(per_slot.values()) == views
        assert {node: after[node] - before.get(node, 0) for node in after} == dict(per_master)
        # A multinomial share of 1/12 of 6,000 views: 500 +- 21; 5 sd is 105.
        margin = 5 * (views * (1 / 12) * (11 / 12)) ** 0.5
        assert max(per_slot.values()) <= views / len(shards) + margin
        assert max(per_master.values()) <= views / 3 + 5 * (views * (1 / 3) * (2 / 3)) ** 0.5
    finally:
        webtier.disconnect(client)


# -- the rescale, per shard ------------------------------------------------------------------


@pytest.mark.matrix
def test_the_rescale_keeps_each_shards_top_keep_a_superset_of_the_global_top(
    redis_url: str, prefix: str
) -> None:
    keep, shards = 5, 4
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, sharded(prefix, shards, keep=keep, interval=WEEK))
    try:
        # 60 items, view counts 1..60, in the shards their names hash to.
        scores = {f"item{k}": float(k + 1) for k in range(60)}
        for item, views in scores.items():
            client.zadd(ranking.ops.shard_for(tier.config, item).viewed, {item: views})
        report = tier.ranking.rescale()
        assert (report.done, report.shards) == (True, shards)
        kept = ranking_scores(client, tier.config)
        # Exactly each shard's own `keep` most viewed, halved...
        by_shard: dict[int, list[str]] = {}
        for item in in_order(scores, shards):
            by_shard.setdefault(item_shard(item, shards), []).append(item)
        expected = {item for items in by_shard.values() for item in items[:keep]}
        assert kept == {item: scores[item] / 2 for item in expected}
        assert (report.left, report.removed) == (len(expected), len(scores) - len(expected))
        # ...which holds the global top `keep`, in at most shards x keep items.
        assert set(in_order(scores, shards)[:keep]) <= set(kept)
        assert len(kept) <= shards * keep
        top = in_order(scores, shards)[:keep]
        assert tier.ranking.top(keep) == [(item, scores[item] / 2) for item in top]
        # The period is rescaled: another call changes nothing.
        again = tier.ranking.rescale()
        assert (again.done, again.shards) == (False, 0)
    finally:
        webtier.disconnect(client)


@pytest.mark.matrix
def test_concurrent_rescalers_halve_each_shard_once(redis_url: str, prefix: str) -> None:
    shards, rescalers = CLUSTER_RANKING_SHARDS, 6
    config = sharded(prefix, shards, interval=WEEK)
    clients = [webtier.connect(redis_url) for _ in range(rescalers)]
    tiers = [webtier.WebTier(client, config) for client in clients]
    try:
        items = [f"item{k}" for k in range(200)]
        for item in items:
            clients[0].zadd(ranking.ops.shard_for(config, item).viewed, {item: 64})
        barrier = threading.Barrier(rescalers)
        reports: list[Any] = []

        def rescale(tier: webtier.WebTier) -> None:
            barrier.wait()
            reports.append(tier.ranking.rescale())

        threads = [threading.Thread(target=rescale, args=(tier,)) for tier in tiers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Each shard rescaled by exactly one of them, whichever got there first.
        assert sum(report.shards for report in reports) == shards
        assert sum(report.left for report in reports) == len(items)
        assert set(ranking_scores(clients[0], config).values()) == {32.0}
    finally:
        for client in clients:
            webtier.disconnect(client)


@pytest.mark.anyio
@pytest.mark.matrix
async def test_with_no_worker_every_shard_stays_bounded_and_expires(
    tier_factory: Any, prefix: str, redis_url: str
) -> None:
    from webtier.ranking.views import UPKEEP_EVERY

    config = sharded(prefix, 3, keep=20, expire_after=600)
    tier = tier_factory(config)
    token = await tier.sessions.new()
    client = webtier.connect(redis_url)
    try:
        for n in range(600):  # distinct items, half through touches, half direct
            if n % 2:
                await tier.sessions.touch(token, item=f"item{n}")
            else:
                await tier.ranking.record_view(f"item{n}")
        for shard in ranking.ops.shards_of(config):
            # One process: twice `keep`, plus the shard's views between two upkeeps.
            assert 0 < client.zcard(shard.viewed) <= 2 * 20 + UPKEEP_EVERY
            assert 0 < client.pttl(shard.viewed) <= 600_000
    finally:
        webtier.disconnect(client)


# -- the shard count as a deployment setting ----------------------------------------------


@pytest.mark.anyio
async def test_a_different_shard_count_is_refused_like_every_layout_setting(
    tier_factory: Any, prefix: str, redis_url: str
) -> None:
    first = tier_factory(sharded(prefix, 3))
    stored = await first.deployment.check()
    assert stored.values["ranking.shards"] == 3
    other = tier_factory(sharded(prefix, CLUSTER_RANKING_SHARDS))
    with pytest.raises(SettingsMismatch) as refused:
        await other.deployment.check()
    assert refused.value.differences == (("ranking.shards", CLUSTER_RANKING_SHARDS, 3),)
    # Left to the client, a single server's tier decides 1: refused too.
    auto = tier_factory(Config(prefix=prefix))
    assert auto.config.ranking.shards == 1
    with pytest.raises(SettingsMismatch, match=r"ranking.shards is 1 here, 3 in Redis"):
        await auto.deployment.check()


def test_settings_stored_before_the_shards_existed_mean_one_shard(
    redis_url: str, prefix: str
) -> None:
    """A deployment whose settings predate ranking.shards wrote the book's
    one key: a tier of 12 shards is refused, one of 1 goes on."""
    client = webtier.connect(redis_url)
    try:
        one = webtier.WebTier(client, sharded(prefix, 1))
        stored = one.deployment.check()
        key = one.config.keys.deployment_settings
        old = dict(stored.values)
        del old["ranking.shards"]
        client.set(key, json.dumps({"version": 1, "settings": old}))
        assert one.deployment.check().values["ranking.shards"] == 1
        with pytest.raises(SettingsMismatch, match=r"ranking\.shards"):
            webtier.WebTier(client, sharded(prefix, 12)).deployment.check()
    finally:
        webtier.disconnect(client)


def test_the_book_keeps_its_one_key_on_every_client(redis_url: str) -> None:
    from webtier import book

    client = webtier.connect(redis_url)
    try:
        assert book.tier_for(client).config.ranking.shards == 1
    finally:
        webtier.disconnect(client)
    auto = dataclasses.replace(Config(), ranking=RankingSettings(shards=None))
    assert auto.for_client(cluster=True).ranking.shards == CLUSTER_RANKING_SHARDS
    assert auto.for_client(cluster=False).ranking.shards == 1
