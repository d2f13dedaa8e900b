"""Ranking operations fed replies by hand: what they send, what they return."""

from __future__ import annotations

import pytest

from tests.helpers import drive
from webtier._core.protocol import Gather, Request, ScriptCall
from webtier._ops import ranking
from webtier.config import Config, RankingSettings
from webtier.errors import InvalidInput, RedisUnavailable


def test_rescale_sends_one_fenced_script_call_and_reads_its_report() -> None:
    cfg = Config(prefix="shop", ranking=RankingSettings(keep=3, factor=0.25, interval=60))
    op = ranking.rescale(cfg)
    request = next(op)
    assert isinstance(request, Request)
    assert request.idempotent  # fenced by period: a repeat changes nothing
    (call,) = request.commands
    assert isinstance(call, ScriptCall)
    assert call.keys == ("shop:{v}:viewed", "shop:{v}:rescaled")
    assert call.args == (60, 3, "0.25", 86_400_000)  # no client clock: the server's decides
    report = drive(op, [[[1, 7, 4, 3, 1500]]], started=True).value
    assert report == ranking.RescaleReport(True, 7, 4, 3, 1.5)


def test_factor_one_is_sent_as_one() -> None:
    op = ranking.rescale(Config(ranking=RankingSettings(factor=1)))
    (call,) = next(op).commands  # type: ignore[union-attr]
    assert call.args[2] == "1"  # type: ignore[union-attr]


def test_record_many_sends_one_request_and_reports_its_outcome() -> None:
    cfg = Config(prefix="p")
    assert drive(ranking.record_many(cfg, [])).value == []
    op = ranking.record_many(cfg, [("a", 3), ("b", 1)])
    gather = next(op)
    assert isinstance(gather, Gather)
    (request,) = gather.requests
    assert request.commands == (
        ("ZINCRBY", "p:{v}:viewed", 3, "a"),
        ("ZINCRBY", "p:{v}:viewed", 1, "b"),
        ranking.upkeep_call(cfg),  # every flush keeps the ranking bounded
    )
    assert not request.idempotent
    error = RedisUnavailable("down")
    assert drive(op, [[error]], started=True).value == [([("a", 3), ("b", 1)], error)]


def test_top_items_and_send() -> None:
    op = ranking.top_items(Config(prefix="p"), 2)
    assert next(op).commands == (("ZREVRANGE", "p:{v}:viewed", 0, 1),)  # type: ignore[union-attr]
    assert drive(op, [[[b"x", b"y"]]], started=True).value == ["x", "y"]
    with pytest.raises(InvalidInput):
        next(ranking.top_items(Config(), 0))
    assert list(ranking.send(())) == []


def test_the_aggregators_flush_sums_each_item_once() -> None:
    from webtier.ranking import _send_views

    entries = [("a", 2, 10.0), ("b", 1, 10.0), ("a", 3, 11.0), ("c", 0, 11.0)]
    op = _send_views(Config(prefix="p"), entries)
    gather = next(op)
    assert isinstance(gather, Gather)
    (request,) = gather.requests
    viewed = "p:{v}:viewed"
    assert request.commands[:2] == (("ZINCRBY", viewed, 5, "a"), ("ZINCRBY", viewed, 1, "b"))
    # The one request's outcome is every entry's, as the recorder settles them.
    assert drive(op, [[[b"5", b"1"]]], started=True).value == [(entries, None)]
