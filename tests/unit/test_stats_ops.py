"""Statistics operations, fed replies by hand."""

from __future__ import annotations

import math
import statistics
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webtier import stats
from webtier._core.keys import shard_of
from webtier._core.protocol import Request, ScriptCall
from webtier.config import Clock, Config, StatsSettings
from webtier.errors import ConfigError, InvalidInput, ServerError

START = 1_700_002_800  # an hour's start
NOW = START + 1234.5
CFG = Config(prefix="p", stats=StatsSettings(shards=4), clock=Clock(wall=lambda: NOW))


def script_call(step: Any) -> ScriptCall:
    assert isinstance(step, Request)
    assert not step.idempotent
    (call,) = step.commands
    assert isinstance(call, ScriptCall)
    assert call.script is stats.ops.RECORD
    return call


def test_an_access_time_is_one_script_call_with_its_record_and_listing() -> None:
    op = stats.ops.record(CFG, "/item/{id}", "AccessTime", 0.25)
    call = script_call(next(op))
    tag = f"p:{{s:{shard_of('/item/{id}', 4)}}}"
    assert call.keys == (
        f"{tag}:3600:{START}:AccessTime:/item/{{id}}",
        f"{tag}:ctx:3600:{START}:AccessTime",
    )
    bucket = stats.ops.bucket_of(0.25, 25)
    assert call.args == (3600, START, 24, "0.25", bucket, "0", "/item/{id}", 10_000)
    with pytest.raises(StopIteration) as done:
        op.send([[1, 3, b"0.75", b"0.5"]])
    assert done.value.value == stats.ops.Recorded(START, 3, 0.75, 0.5)
    assert done.value.value.sumsq == pytest.approx(0.5 + 0.75**2 / 3)


def test_an_unranked_type_without_histograms_touches_one_key() -> None:
    cfg = Config(prefix="p", stats=StatsSettings(histograms=False, shards=4), clock=CFG.clock)
    call = script_call(next(stats.ops.record(cfg, "checkout", "Basket", -3, failed=True)))
    assert len(call.keys) == 1
    assert call.args == (3600, START, 24, "-3.0", "", "1")


def test_the_servers_period_wins_over_the_callers_guess() -> None:
    op = stats.ops.record(CFG, "/", "AccessTime", 1.0)
    first = script_call(next(op))
    # The server's clock is in the next hour: nothing written, its start named.
    second = script_call(op.send([[0, START + 3600]]))
    assert str(START + 3600) in second.keys[0]
    assert second.args[1] == START + 3600
    assert first.keys != second.keys
    with pytest.raises(StopIteration) as done:
        op.send([[1, 1, b"1", b"0"]])
    assert done.value.value.start == START + 3600


def test_a_server_clock_that_never_settles_is_an_error() -> None:
    op = stats.ops.record(CFG, "/", "AccessTime", 1.0)
    next(op)
    op.send([[0, START + 3600]])
    op.send([[0, START]])
    with pytest.raises(ServerError, match="clock"):
        op.send([[0, START + 3600]])


@pytest.mark.parametrize(
    ("value", "stat_type"),
    [
        (math.nan, "Basket"),
        (math.inf, "Basket"),
        (-math.inf, "Basket"),
        (1e16, "Basket"),
        ("1", "Basket"),
        (None, "Basket"),
        (True, "Basket"),
        (-0.001, "AccessTime"),
        (complex(1, 0), "Basket"),
    ],
)
def test_bad_values_are_refused_before_anything_is_sent(value: object, stat_type: str) -> None:
    with pytest.raises(InvalidInput, match="value"):
        next(stats.ops.record(CFG, "ctx", stat_type, value))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3.0), (Fraction(1, 4), 0.25), (Decimal("2.5"), 2.5), (-0.0, 0.0), (-7.5, -7.5)],
)
def test_numbers_of_every_kind_are_accepted(value: object, expected: float) -> None:
    number = stats.ops.check_value(value, "Basket", CFG.stats)
    assert number == expected
    assert math.copysign(1, number) == math.copysign(1, expected)


@pytest.mark.parametrize("stat_type", ["", "a:b", "1st", "x" * 65, "a b", "ünï", 7])
def test_bad_types_are_refused(stat_type: object) -> None:
    with pytest.raises(InvalidInput, match="type"):
        next(stats.ops.record(CFG, "ctx", stat_type, 1.0))  # type: ignore[arg-type]


@pytest.mark.parametrize("context", ["", "a\nb", "x" * 2000, 5])
def test_bad_contexts_are_refused(context: object) -> None:
    with pytest.raises(InvalidInput, match="context"):
        next(stats.ops.record(CFG, context, "AccessTime", 1.0))  # type: ignore[arg-type]


def test_reads_ask_the_server_for_its_time_along_with_the_guess() -> None:
    op = stats.ops.get(CFG, "a", "AccessTime", periods=2)
    (request,) = next(op)
    assert request.commands[-1] == ("TIME",)
    keys = [command[1] for command in request.commands[:-1]]
    assert [k.split(":")[4] for k in keys] == [str(START), str(START - 3600)]
    record = [b"count", b"2", b"sum", b"3", b"m2", b"0.5", b"min", b"1", b"max", b"2"]
    with pytest.raises(StopIteration) as done:
        op.send([[record, [], [str(int(NOW)).encode(), b"0"]]])
    summary = done.value.value
    assert (summary.count, summary.sum, summary.start, summary.periods) == (2, 3.0, START - 3600, 2)


def test_a_read_on_the_wrong_side_of_the_hour_is_read_again() -> None:
    op = stats.ops.get(CFG, "a", "AccessTime")
    next(op)
    again = op.send([[[], [str(START + 3600).encode(), b"5"]]])
    (request,) = again
    assert request.commands == (
        ("HGETALL", f"p:{{s:{shard_of('a', 4)}}}:3600:{START + 3600}:AccessTime:a"),
    )
    with pytest.raises(StopIteration) as done:
        op.send([[[]]])
    assert done.value.value.start == START + 3600
    assert done.value.value.count == 0


def test_periods_n_and_by_are_checked() -> None:
    with pytest.raises(InvalidInput, match="periods"):
        next(stats.ops.get(CFG, "a", "AccessTime", periods=26))
    with pytest.raises(InvalidInput, match="n"):
        next(stats.ops.slowest(CFG, n=0))
    with pytest.raises(InvalidInput, match="not ranked"):
        next(stats.ops.slowest(CFG, type="Basket"))
    for by in ("median", "p", "p101", "pxx", 95):
        with pytest.raises(InvalidInput, match="by"):
            next(stats.ops.slowest(CFG, by=by))  # type: ignore[arg-type]
    no_histograms = Config(stats=StatsSettings(histograms=False), clock=CFG.clock)
    with pytest.raises(InvalidInput, match="histograms"):
        next(stats.ops.slowest(no_histograms, by="p95"))


def test_slowest_reads_the_listed_contexts_then_scores_their_records() -> None:
    cfg = Config(prefix="p", stats=StatsSettings(shards=2), clock=CFG.clock)
    op = stats.ops.slowest(cfg, n=2, periods=2)
    first = next(op)
    assert [[c[0] for c in r.commands] for r in first] == [
        ["SMEMBERS", "SMEMBERS", "TIME"],  # the server's time rides along
        ["SMEMBERS", "SMEMBERS"],
    ]
    now = [str(int(NOW)).encode(), b"0"]
    second = op.send([[[b"/a", b"/b"], [b"/c"], now], [[], []]])
    commands = [c for r in second for c in r.commands]
    assert {c[0] for c in commands} == {"HMGET"}  # by mean: no histograms read
    assert len(commands) == 3 * 2

    def record(total: int, count: int) -> list[bytes | None]:
        return [str(count).encode(), str(total).encode(), b"0", b"1", b"1", None]

    by_key = {"/a": record(3, 1), "/b": record(10, 2), "/c": record(8, 1)}
    replies = [
        [by_key[c[1].rsplit(":", 1)[1]] if str(START) in c[1] else [None] * 6 for c in r.commands]
        for r in second
    ]
    with pytest.raises(StopIteration) as done:
        op.send(replies)
    assert done.value.value == [("/c", 8.0), ("/b", 5.0)]


def summary_of(values: list[float]) -> stats.ops.Summary:
    summary = stats.ops.Summary("c", "T", 0, 1)
    for value in values:
        one = stats.ops.Summary("c", "T", 0, 1, 1, value, 0.0, value, value)
        summary = summary.merge(one)
    return summary


@given(st.lists(st.lists(st.integers(-(10**6), 10**6), max_size=20), min_size=1, max_size=6))
@settings(deadline=None)
def test_merged_periods_give_the_statistics_of_all_their_values(
    periods: list[list[int]],
) -> None:
    merged = stats.ops.Summary("c", "T", 0, 1)
    for values in periods:
        merged = merged.merge(summary_of([float(v) for v in values]))
    everything = [v for values in periods for v in values]
    assert merged.count == len(everything)
    if not everything:
        assert (merged.mean, merged.stddev, merged.min) == (None, None, None)
        return
    assert merged.sum == sum(everything)
    assert (merged.min, merged.max) == (min(everything), max(everything))
    assert merged.mean == pytest.approx(statistics.fmean(everything))
    expected = statistics.stdev(everything) if len(everything) > 1 else 0.0
    assert merged.stddev == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_the_spread_of_large_values_survives_where_the_books_formula_loses_it() -> None:
    values = [1e9 + d for d in (1, 2, 3, 4)] * 25_000
    summary = summary_of(values)
    assert summary.stddev == pytest.approx(statistics.stdev(values), rel=1e-9)
    # The book's sum of squares, in doubles: every digit lost to cancellation.
    total, sumsq = sum(values), sum(v * v for v in values)
    book = math.sqrt(max(sumsq - total * total / len(values), 0) / (len(values) - 1))
    assert book != pytest.approx(statistics.stdev(values), rel=0.01)


@pytest.mark.parametrize(
    "build",
    [
        lambda: StatsSettings(period=7),
        lambda: StatsSettings(period=0),
        lambda: StatsSettings(keep=-1),
        lambda: StatsSettings(relative_error=0.5),
        lambda: StatsSettings(rank_limit=0),
        lambda: StatsSettings(ranked=frozenset({"a:b"})),
        lambda: StatsSettings(ranked={"AccessTime"}),  # type: ignore[arg-type]
        lambda: StatsSettings(shards=0),
    ],
)
def test_bad_stats_settings_fail_when_built(build: Any) -> None:
    with pytest.raises(ConfigError):
        build()
