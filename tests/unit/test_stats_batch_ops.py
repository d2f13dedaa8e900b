"""Batched statistics as operations fed replies: what a flush sends, the
server's period, failures per (context, type), and batches merged in process."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webtier._core.keys import shard_of
from webtier._core.protocol import Gather, ScriptCall
from webtier.config import Clock, Config, StatsSettings
from webtier.errors import OutcomeUnknown, RedisUnavailable, ServerError
from webtier.stats.batch import MERGE, Batch, merge_many
from webtier.stats.histogram import bucket_of

START = 1_700_002_800  # an hour's start
NOW = START + 1234.5
CFG = Config(prefix="p", stats=StatsSettings(shards=4), clock=Clock(wall=lambda: NOW))


def batch_of(values: list[float], failed: int = 0) -> Batch:
    batch = Batch()
    for i, value in enumerate(values):
        batch.add(value, i < failed, bucket_of(value, 25))
    return batch


def calls(step: Any) -> list[ScriptCall]:
    assert isinstance(step, Gather)
    found = []
    for request in step.requests:
        assert not request.idempotent
        (call,) = request.commands
        assert isinstance(call, ScriptCall)
        assert call.script is MERGE
        found.append(call)
    return found


def test_a_flush_is_one_script_call_per_context_and_type() -> None:
    access = batch_of([0.25, 0.5, 0.25], failed=1)
    basket = batch_of([3.0])
    entries = [("/item/{id}", "AccessTime", access), ("checkout", "Basket", basket)]
    op = merge_many(CFG, entries)
    first, second = calls(next(op))
    tag = f"p:{{s:{shard_of('/item/{id}', 4)}}}"
    assert first.keys == (
        f"{tag}:3600:{START}:AccessTime:/item/{{id}}",
        f"{tag}:ctx:3600:{START}:AccessTime",
    )
    assert first.args == (
        3600, START, 24, 3, "1.0", repr(access.m2), "0.25", "0.5", 1, "/item/{id}", 10_000,
        bucket_of(0.25, 25), 2, bucket_of(0.5, 25), 1,
    )  # fmt: skip
    assert len(second.keys) == 1  # not ranked: no listing
    assert second.args[9:11] == ("", "")
    with pytest.raises(StopIteration) as done:
        op.send([[[1, 3, b"1", b"0.04"]], [[1, 1, b"3", b"0"]]])
    assert done.value.value == [(entries, None)]


def test_stale_guesses_are_sent_again_in_the_servers_period() -> None:
    entries = [("/a", "AccessTime", batch_of([1.0])), ("/b", "AccessTime", batch_of([2.0]))]
    op = merge_many(CFG, entries)
    next(op)
    # The hour turned on the way: /a was merged, /b refused and is sent again.
    (again,) = calls(op.send([[[1, 1, b"1", b"0"]], [[0, START + 3600]]]))
    assert again.args[1] == START + 3600
    assert str(START + 3600) in again.keys[0]
    assert again.args[9] == "/b"
    with pytest.raises(StopIteration) as done:
        op.send([[[1, 1, b"2", b"0"]]])
    assert sorted(c for group, _ in done.value.value for c, _, _ in group) == ["/a", "/b"]


def test_failures_are_reported_per_entry_and_a_clock_that_never_settles_is_an_error() -> None:
    entries = [(f"/{i}", "AccessTime", batch_of([1.0])) for i in range(3)]
    op = merge_many(CFG, entries)
    next(op)
    refused, unknown = RedisUnavailable("refused"), OutcomeUnknown("lost reply")
    op.send([refused, unknown, [[0, START + 3600]]])
    op.send([[[0, START]]])
    with pytest.raises(StopIteration) as done:
        op.send([[[0, START + 3600]]])
    results = {group[0][0]: error for group, error in done.value.value}
    assert results["/0"] is refused
    assert results["/1"] is unknown
    assert isinstance(results["/2"], ServerError)


def test_nothing_to_flush_sends_nothing() -> None:
    with pytest.raises(StopIteration) as done:
        next(merge_many(CFG, []))
    assert done.value.value == []


# Squares of values under 1e-154 are subnormal, with fewer bits than a double:
# below this, m2 is compared absolutely.
TINY = 1e-290

VALUES = st.lists(st.floats(-1e6, 1e6, allow_subnormal=False), min_size=1, max_size=50)


@given(VALUES, VALUES)
def test_merged_batches_equal_one_batch_of_all_their_values(a: list[float], b: list[float]) -> None:
    merged, other, whole = batch_of(a), batch_of(b), batch_of(a + b)
    merged.merge(other)
    assert (merged.count, merged.min, merged.max, merged.buckets) == (
        whole.count, whole.min, whole.max, whole.buckets,
    )  # fmt: skip
    scale = max(map(abs, a + b))
    assert math.isclose(merged.sum, whole.sum, rel_tol=1e-12, abs_tol=1e-12 * scale * whole.count)
    assert math.isclose(
        merged.m2, whole.m2, rel_tol=1e-9, abs_tol=1e-12 * scale**2 * whole.count + TINY
    )
    if whole.count > 1:
        exact = statistics.variance(a + b) * (whole.count - 1)
        assert math.isclose(
            whole.m2, exact, rel_tol=1e-9, abs_tol=1e-12 * scale**2 * whole.count + TINY
        )
