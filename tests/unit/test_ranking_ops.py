"""Ranking operations fed replies by hand: what they send, what they return."""

from __future__ import annotations

import zlib

import pytest
from redis.crc import key_slot

from tests.helpers.ops import drive
from webtier._core.keys import ranking_tag
from webtier._core.protocol import Gather, Request, ScriptCall
from webtier.config import Config, RankingSettings
from webtier.errors import InvalidInput, RedisUnavailable
from webtier.ranking import ops


def test_rescale_sends_one_fenced_script_call_and_reads_its_report() -> None:
    cfg = Config(prefix="shop", ranking=RankingSettings(keep=3, factor=0.25, interval=60))
    op = ops.rescale(cfg)
    (request,) = next(op)  # type: ignore[misc]
    assert isinstance(request, Request)
    assert request.idempotent  # fenced by period: a repeat changes nothing
    (call,) = request.commands
    assert isinstance(call, ScriptCall)
    assert call.keys == ("shop:{v}:viewed", "shop:{v}:rescaled")
    assert call.args == (60, 3, "0.25", 86_400_000)  # no client clock: the server's decides
    report = drive(op, [[[[1, 7, 4, 3, 1500]]]], started=True).value
    assert report == ops.RescaleReport(True, 7, 4, 3, 1.5, shards=1)


def test_factor_one_is_sent_as_one() -> None:
    op = ops.rescale(Config(ranking=RankingSettings(factor=1)))
    ((call,),) = (request.commands for request in next(op))  # type: ignore[union-attr]
    assert call.args[2] == "1"  # type: ignore[union-attr]


def test_record_many_sends_one_request_and_reports_its_outcome() -> None:
    cfg = Config(prefix="p")
    assert drive(ops.record_many(cfg, [])).value == []
    op = ops.record_many(cfg, [("a", 3), ("b", 1)])
    gather = next(op)
    assert isinstance(gather, Gather)
    (request,) = gather.requests
    assert request.commands == (
        ("ZINCRBY", "p:{v}:viewed", 3, "a"),
        ("ZINCRBY", "p:{v}:viewed", 1, "b"),
        ops.upkeep_call(cfg, ops.shard_for(cfg, "a")),  # every flush keeps it bounded
    )
    assert not request.idempotent
    error = RedisUnavailable("down")
    assert drive(op, [[error]], started=True).value == [([("a", 3), ("b", 1)], error)]


def test_top_items_and_send() -> None:
    op = ops.top_items(Config(prefix="p"), 2)
    assert next(op).commands == (("ZREVRANGE", "p:{v}:viewed", 0, 1),)  # type: ignore[union-attr]
    assert drive(op, [[[b"x", b"y"]]], started=True).value == ["x", "y"]
    with pytest.raises(InvalidInput):
        next(ops.top_items(Config(), 0))
    assert list(ops.send(())) == []


def test_the_aggregators_flush_sums_each_item_once() -> None:
    from webtier.ranking.views import send_views

    entries = [("a", 2, 10.0), ("b", 1, 10.0), ("a", 3, 11.0), ("c", 0, 11.0)]
    op = send_views(Config(prefix="p"), entries)
    gather = next(op)
    assert isinstance(gather, Gather)
    (request,) = gather.requests
    viewed = "p:{v}:viewed"
    assert request.commands[:2] == (("ZINCRBY", viewed, 5, "a"), ("ZINCRBY", viewed, 1, "b"))
    # The one request's outcome is every entry's, as the recorder settles them.
    assert drive(op, [[[b"5", b"1"]]], started=True).value == [(entries, None)]


# -- several shards ----------------------------------------------------------------------

SHARDED = Config(prefix="p", ranking=RankingSettings(shards=4))


def test_an_item_lives_in_the_shard_of_its_crc32() -> None:
    for item in ("a", "item:42", "é", "x" * 1000):
        shard = ops.shard_for(SHARDED, item)
        assert shard == SHARDED.keys.ranking(4)[zlib.crc32(item.encode()) % 4]
        (request,) = ops.view_requests(SHARDED, item)
        assert request.route == shard.route
        assert request.commands == (("ZINCRBY", shard.viewed, 1, item),)


def test_each_shard_has_its_own_tag_in_its_own_slice_of_the_slots() -> None:
    for shards in (2, 3, 12, 256):
        tags = [ranking_tag(i, shards) for i in range(shards)]
        assert len(set(tags)) == shards
        for i, tag in enumerate(tags):
            assert (
                i * 16384 // shards
                <= key_slot(f"p:{{{tag}}}:viewed".encode())
                < ((i + 1) * 16384 // shards)
            )
    assert SHARDED.keys.ranking(1)[0].viewed == "p:{v}:viewed"  # the book's layout
    assert SHARDED.keys.ranking(4)[0].viewed.startswith("p:{v:0:")


def test_record_many_sends_one_request_per_shard_and_reports_each() -> None:
    items = [f"i{k}" for k in range(20)]
    op = ops.record_many(SHARDED, [(item, 1) for item in items])
    gather = next(op)
    assert isinstance(gather, Gather)
    assert len(gather.requests) == 4
    for request in gather.requests:
        counted = [c for c in request.commands if not isinstance(c, ScriptCall)]
        assert {c[1] for c in counted} == {f"{request.route}:viewed"}
    error = RedisUnavailable("down")
    replies = [error] + [[b"1"]] * 3
    results = drive(op, [replies], started=True).value
    assert sorted(item for found, _ in results for item, _ in found) == sorted(items)
    assert [e for _, e in results] == [error, None, None, None]


def test_rank_counts_the_higher_scores_of_the_other_shards() -> None:
    item = "i3"
    home = zlib.crc32(item.encode()) % 4
    op = ops.rank(SHARDED, item)
    first = next(op)
    assert first.commands[0][0] == "ZREVRANK"  # type: ignore[union-attr]
    counts = op.send([2, b"5"])  # third in its shard, 5 views
    assert len(counts) == 3
    for request in counts:
        ((command, key, low, high),) = request.commands
        j = [s.viewed for s in SHARDED.keys.ranking(4)].index(key)
        assert (command, high) == ("ZCOUNT", "+inf")
        assert low == ("5.0" if j < home else "(5.0")  # ties: lower shards first
    assert drive(op, [[[1], [0], [4]]], started=True).value == 2 + 5
    unranked = ops.rank(SHARDED, item)
    next(unranked)
    assert drive(unranked, [[None, None]], started=True).value is None


def test_top_reads_twice_n_then_only_the_shards_that_may_hold_more() -> None:
    shards = SHARDED.keys.ranking(4)
    op = ops.top(SHARDED, 4)
    first = next(op)
    assert [r.commands for r in first] == [  # type: ignore[union-attr]
        (("ZREVRANGE", s.viewed, 0, 1, "WITHSCORES"),) for s in shards
    ]
    # Shard 0 holds the four best: its last read item made the top.
    replies = [[[b"a", b"9", b"b", b"8"]], [[b"e", b"1"]], [[]], [[b"f", b"1", b"g", b"0.5"]]]
    again = op.send(replies)
    assert [r.commands for r in again] == [  # type: ignore[union-attr]
        (("ZREVRANGE", shards[0].viewed, 2, 3, "WITHSCORES"),)
    ]
    found = drive(op, [[[[b"c", b"7", b"d", b"1"]]]], started=True).value
    # Equal scores: the lower shard first.
    assert found == [("a", 9.0), ("b", 8.0), ("c", 7.0), ("d", 1.0)]
