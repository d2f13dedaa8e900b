"""Log-linear histograms: the error bound, against exact percentiles."""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webtier.config.data import sub_buckets_for
from webtier.errors import ConfigError, InvalidInput
from webtier.stats.histogram import (
    Histogram,
    bounds,
    bucket_of,
    is_bucket,
    rank,
    representative,
)

M = sub_buckets_for(0.02)
ERROR = 0.02

# Positive values over 24 orders of magnitude, negative ones, and zeros.
magnitudes = st.floats(min_value=1e-9, max_value=1e15, allow_nan=False, allow_infinity=False)
values = st.one_of(magnitudes, magnitudes.map(lambda v: -v), st.just(0.0))
percents = st.one_of(
    st.sampled_from([0, 1, 50, 90, 95, 99, 99.9, 100]),
    st.floats(min_value=0, max_value=100, allow_nan=False),
)


def exact_percentile(samples: list[float], percent: float) -> float:
    """Nearest rank, from the samples themselves: the smallest value with at
    least ``percent`` % of the samples at or below it."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(Fraction(repr(float(percent))) * len(ordered) / 100))
    return ordered[rank - 1]


def within(estimate: float, exact: float, error: float) -> bool:
    # 1e-12: the float rounding of the bucket bounds themselves.
    return abs(estimate - exact) <= (error + 1e-12) * abs(exact)


def test_two_percent_needs_25_buckets_per_power_of_two() -> None:
    assert M == 25
    assert Histogram(M).relative_error <= ERROR


@pytest.mark.parametrize("bad", [0, 0.0001, 0.5, math.nan])
def test_a_relative_error_out_of_range_is_refused(bad: float) -> None:
    with pytest.raises(ConfigError):
        sub_buckets_for(bad)


@given(st.lists(values, min_size=1, max_size=400), percents)
@settings(max_examples=400, deadline=None)
def test_percentiles_are_within_the_relative_error_of_the_exact_ones(
    samples: list[float], percent: float
) -> None:
    histogram = Histogram.of(samples, M)
    exact = exact_percentile(samples, percent)
    assert within(histogram.percentile(percent), exact, ERROR)  # type: ignore[arg-type]
    # Clamping to the known extremes only brings it closer.
    clamped = histogram.percentile(percent, min(samples), max(samples))
    assert within(clamped, exact, ERROR)  # type: ignore[arg-type]


@given(
    st.lists(st.lists(magnitudes, max_size=60), min_size=1, max_size=8),
    percents,
    st.sampled_from([0.01, 0.02, 0.05]),
)
@settings(max_examples=200, deadline=None)
def test_merged_hours_give_the_percentiles_of_all_their_samples(
    hours: list[list[float]], percent: float, error: float
) -> None:
    layout = sub_buckets_for(error)
    merged = Histogram(layout)
    for hour in hours:
        merged = merged.merge(Histogram.of(hour, layout))
    everything = [v for hour in hours for v in hour]
    assert dict(merged.counts) == dict(Histogram.of(everything, layout).counts)
    if everything:
        estimate = merged.percentile(percent)
        assert within(estimate, exact_percentile(everything, percent), error)  # type: ignore[arg-type]
    else:
        assert merged.percentile(percent) is None


@given(values)
def test_a_value_lies_in_its_bucket_and_near_its_representative(value: float) -> None:
    bucket = bucket_of(value, M)
    assert is_bucket(bucket)
    low, high = bounds(bucket, M)
    assert low <= value <= high or math.isclose(value, low, rel_tol=1e-12)
    assert within(representative(bucket, M), value, ERROR)


def test_buckets_at_powers_of_two_and_their_edges() -> None:
    assert bucket_of(1.0, M) == "p25"  # 1 = 0.5 * 2**1: exponent 1, sub-bucket 0
    assert bucket_of(math.nextafter(1.0, 0), M) == "p24"  # the top sub-bucket below it
    assert bucket_of(-1.0, M) == "n25"
    assert bucket_of(0.0, M) == bucket_of(-0.0, M) == "z"
    smallest = sys.float_info.min  # the smallest normal double keeps the bound
    assert within(representative(bucket_of(smallest, M), M), smallest, ERROR)
    assert is_bucket(bucket_of(5e-324, M))  # a subnormal still has a bucket
    assert [is_bucket(name) for name in ("count", "p", "p1x", "p-143", "n7")] == [
        False,
        False,
        False,
        True,
        True,
    ]


def test_percentiles_follow_the_nearest_rank() -> None:
    histogram = Histogram.of([float(v) for v in range(1, 101)], M)
    assert histogram.count == 100
    for percent in (1, 50, 90, 95, 99, 100):
        assert within(histogram.percentile(percent), float(percent), ERROR)  # type: ignore[arg-type]
    # 95 % of 100 values is the 95th (0.95 * 100 > 95 in floats), 10 % of 10
    # the first (0.1 * 10 > 1 in floats).
    assert rank(95, 100) == 95
    assert rank(10, 10) == 1
    assert rank(0, 7) == 1
    assert rank(100, 7) == 7
    assert Histogram(M).percentile(50) is None


def test_negative_values_sort_below_zero_and_positives() -> None:
    samples = [-5.0, -1.0, 0.0, 0.0, 2.0]
    histogram = Histogram.of(samples, M)
    bins = histogram.bins()
    assert [n for _, _, n in bins] == [1, 1, 2, 1]
    for (low, high, _), value in zip(bins, [-5.0, -1.0, 0.0, 2.0], strict=True):
        assert low <= value <= high
    assert within(histogram.percentile(1), -5.0, ERROR)  # type: ignore[arg-type]
    assert histogram.percentile(50) == 0.0


@pytest.mark.parametrize("bad", [-1, 100.5, math.nan, "50", True, None])
def test_a_percent_out_of_range_is_refused(bad: object) -> None:
    with pytest.raises(InvalidInput, match="percent"):
        Histogram.of([1.0], M).percentile(bad)  # type: ignore[arg-type]


def test_histograms_of_different_layouts_do_not_merge() -> None:
    with pytest.raises(ValueError, match="layouts"):
        Histogram(25).merge(Histogram(50))
