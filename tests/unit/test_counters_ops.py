"""Counter operations, fed replies by hand."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.ops import drive
from webtier import counters
from webtier._core.protocol import Gather, Request, ScriptCall
from webtier.config import Config, CounterSettings
from webtier.errors import InvalidInput

CFG = Config(prefix="p", counters=CounterSettings.of((1, 60), samples=10, shards=4))


def test_record_is_one_script_call_with_every_slice() -> None:
    request = next(counters.ops.record(CFG, "hits", 3, now=1_000_000_123.9))
    assert isinstance(request, Request)
    assert not request.idempotent
    (call,) = request.commands
    assert isinstance(call, ScriptCall)
    assert call.script is counters.ops.RECORD
    assert call.keys == (
        "p:{c:3}:known",
        "p:{c:3}:1:hits",
        "p:{c:3}:60:hits",
    )
    # Settings travel as one string, read by the script only when a slice is new.
    settings = "660000 1:10:10000 60:10:600000"  # horizon ms (600 s + 60 s), then s:samples:ttl ms
    assert call.args == (settings, "hits", 3, 1_000_000_123, 1_000_000_080)


BOOK = Config(prefix="p")  # the book's precisions: 1 s to a day


@given(st.lists(st.floats(min_value=0, max_value=2**34, exclude_max=True), max_size=6))
def test_each_record_has_the_slices_of_its_own_time(times: list[float]) -> None:
    # One after another, times in the same second and not (the slices of
    # the last second are kept): each call's are int(now // s) * s.
    for now in [*times, *times[::-1]]:
        (call,) = next(counters.ops.record(BOOK, "hits", 1, now=now)).commands
        assert isinstance(call, ScriptCall)
        assert call.args[3:] == tuple(int(now // s) * s for s in BOOK.counters.seconds)


def test_record_many_has_each_entrys_slices() -> None:
    entries = [("a", 1, 59.5), ("a", 2, 60.0), ("a", 3, 60.9)]
    (request,) = counters.ops._record_request(CFG, entries).commands
    assert isinstance(request, ScriptCall)
    assert request.args[1:] == ("a", 1, 59, 0, "a", 2, 60, 60, "a", 3, 60, 60)


def test_zero_records_nothing() -> None:
    with pytest.raises(StopIteration):
        next(counters.ops.record(CFG, "hits", 0))


@pytest.mark.parametrize("count", [2.0, Fraction(4, 2), -7, 2**53])
def test_whole_numbers_are_counts(count: object) -> None:
    assert counters.ops.check_count(count) == int(count)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "count", [1.5, math.nan, math.inf, "1", None, True, 2**53 + 1, -(2**53) - 1]
)
def test_other_counts_are_refused(count: object) -> None:
    with pytest.raises(InvalidInput, match="count"):
        counters.ops.check_count(count)


@pytest.mark.parametrize("now", [-1, math.nan, math.inf, "now", 2**34, False])
def test_bad_times_are_refused(now: object) -> None:
    with pytest.raises(InvalidInput, match="now"):
        next(counters.ops.record(CFG, "hits", 1, now=now))  # type: ignore[arg-type]


def test_get_parses_resp2_and_resp3_and_sorts() -> None:
    resp2 = [b"120", b"4", b"60", b"-1", b"180", b"2"]
    resp3 = {b"120": b"4", b"60": b"-1", b"180": b"2"}
    for reply in (resp2, resp3):
        assert drive(counters.ops.get(CFG, "hits", 60), [[[reply]]]).value == [
            (60, -1),
            (120, 4),
            (180, 2),
        ]


def test_get_filters_a_time_range() -> None:
    reply = [b"60", b"1", b"120", b"2", b"180", b"3"]
    assert drive(counters.ops.get(CFG, "hits", 60, start=100, end=180), [[[reply]]]).value == [
        (120, 2),
        (180, 3),
    ]


def test_get_refuses_an_unconfigured_precision() -> None:
    with pytest.raises(InvalidInput, match="precision"):
        next(counters.ops.get(CFG, "hits", 5))


def test_get_many_reads_each_shard_once() -> None:
    op = counters.ops.get_many(CFG, ["a", "b", "c", "a"], 1)
    step = next(op)
    assert isinstance(step, tuple)
    commands = [c for request in step for c in request.commands]
    assert sorted(commands) == sorted(
        ("HGETALL", f"p:{{c:{counters.ops.shard_of(n, 4)}}}:1:{n}") for n in "abc"
    )
    replies = [[[] for _ in request.commands] for request in step]
    with pytest.raises(StopIteration) as done:
        op.send(replies)
    assert done.value.value == {"a": [], "b": [], "c": []}


def test_names_merges_shards_and_filters_by_prefix() -> None:
    replies = [[[b"page:/a", b"api:x"]], [[b"page:/b"]], [[]], [[b"page:/a"]]]
    assert drive(counters.ops.names(CFG, "page:"), [replies]).value == ["page:/a", "page:/b"]


def test_record_many_groups_by_shard_in_a_gather() -> None:
    op = counters.ops.record_many(CFG, [("a", 1, 10.0), ("b", 2, 10.0), ("a", 0, 10.0)])
    step = next(op)
    assert isinstance(step, Gather)
    assert (
        sum(len(r.commands[0].keys) - 1 for r in step.requests) == 2 * 2
    )  # 2 names x 2 precisions


@pytest.mark.parametrize(
    ("pass_number", "due"),
    [
        (0, [True, True, True]),
        (1, [True, True, False]),
        (5, [True, True, True]),
        (1440, [True, True, True]),
    ],
)
def test_cleanup_schedule_follows_the_book(pass_number: int, due: list[bool]) -> None:
    settings = CounterSettings.of((1, 60, 300))
    assert counters.ops.due_precisions(settings, pass_number) == due
