"""The capacity model: the book's shop as docs/capacity.md works it, more of
anything never needs less, and shops it cannot size are refused."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webtier import capacity
from webtier.capacity import GIB, MEASURED, Shop, size
from webtier.errors import ConfigError

BOOK = size()


def test_the_book_shop_peaks_at_the_books_6000_per_second() -> None:
    assert Shop().average_hits_per_s == pytest.approx(1157.4, abs=0.1)
    assert BOOK.peak_hits_per_s == pytest.approx(6000)


def test_the_book_shop_fits_one_server_as_the_book_says() -> None:
    # docs/capacity.md, "The book's shop": about 10 GiB, nearly all sessions,
    # well under a core at peak.
    assert BOOK.masters == 1
    assert 8 * GIB < BOOK.memory_total < 12 * GIB
    assert BOOK.memory_bytes["sessions"] / BOOK.memory_total > 0.9
    assert BOOK.memory_bytes["sessions"] == pytest.approx(10e6 * MEASURED.session_bytes)
    assert BOOK.cpu_cores_at_peak < Shop().headroom
    assert all(worker.processes == 1 for worker in BOOK.workers)


def test_a_shop_a_hundred_times_larger_needs_a_cluster() -> None:
    large = size(Shop(hits_per_day=10e9, users=500e6, sessions=1e9))
    assert large.peak_hits_per_s == pytest.approx(100 * BOOK.peak_hits_per_s)
    # On a Cluster the touch's view is a request of its own.
    view = MEASURED.cpu_us[capacity.ITEM_VIEW] * MEASURED.mix_cpu_factor
    assert large.cpu_us_per_hit == pytest.approx(BOOK.cpu_us_per_hit + view)
    assert large.memory_bytes["sessions"] == pytest.approx(100 * BOOK.memory_bytes["sessions"])
    assert large.masters >= 3
    assert large.masters == max(large.masters_for_cpu, large.masters_for_memory)


def test_cpu_is_the_mix_priced_at_the_measured_costs() -> None:
    mix = {capacity.CHECK: 2, capacity.PAGE_HIT: 1}
    sizing = size(Shop(mix=mix))
    alone = 2 * MEASURED.cpu_us[capacity.CHECK] + MEASURED.cpu_us[capacity.PAGE_HIT]
    expected = alone * MEASURED.mix_cpu_factor  # a mix costs more than its parts alone
    assert sizing.cpu_us_per_hit == pytest.approx(expected)
    assert sizing.cpu_cores_at_peak == pytest.approx(sizing.peak_hits_per_s * expected / 1e6)


def test_a_page_hit_sends_the_page() -> None:
    small, large = size(Shop(page_bytes=1_000)), size(Shop(page_bytes=101_000))
    per_hit = (large.network_out_per_s - small.network_out_per_s) / small.peak_hits_per_s
    assert per_hit == pytest.approx(100_000 * capacity.SHOP_MIX[capacity.PAGE_HIT])


def test_the_ranking_holds_at_most_the_catalogue() -> None:
    few = capacity.memory(Shop(items=10))
    assert few["view ranking"] == pytest.approx(10 * MEASURED.ranked_item_bytes)


GROWING = (
    "hits_per_day", "users", "sessions", "items", "cached_pages", "page_bytes",
    "cached_rows", "counters", "stats_contexts", "peak_factor",
)  # fmt: skip


@given(
    field=st.sampled_from(GROWING),
    base=st.floats(min_value=1, max_value=1e9),
    factor=st.floats(min_value=1, max_value=1e3),
)
def test_more_of_anything_never_needs_less(field: str, base: float, factor: float) -> None:
    smaller = size(Shop(**{field: base}))
    larger = size(Shop(**{field: base * factor}))
    assert larger.memory_total >= smaller.memory_total
    assert larger.cpu_cores_at_peak >= smaller.cpu_cores_at_peak
    assert larger.masters >= smaller.masters
    assert larger.network_out_per_s >= smaller.network_out_per_s
    for big, small in zip(larger.workers, smaller.workers, strict=True):
        assert big.processes >= small.processes


@given(headroom=st.floats(min_value=0.01, max_value=Shop().headroom))
def test_less_headroom_needs_more_masters(headroom: float) -> None:
    shop = Shop(hits_per_day=10e9)
    assert size(dataclasses.replace(shop, headroom=headroom)).masters >= size(shop).masters


def test_a_cluster_has_three_masters_at_least() -> None:
    sizing = size(Shop(hits_per_day=1.6e8))
    assert sizing.masters_for_cpu == 2
    assert sizing.masters == 3


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sessions", -1),
        ("hits_per_day", math.nan),
        ("items", math.inf),
        ("headroom", 0),
        ("headroom", 1.5),
        ("peak_factor", 0.5),
        ("row_refresh_s", 0),
        ("master_memory", -1),
        ("mix", {"teleport": 1}),
        ("mix", {capacity.CHECK: -1}),
        ("ranking_shards", 0),
    ],
)
def test_a_shop_it_cannot_size_is_refused(field: str, value: object) -> None:
    with pytest.raises(ConfigError):
        Shop(**{field: value})  # type: ignore[arg-type]


def test_costs_name_every_operation() -> None:
    fields = {f.name: getattr(MEASURED, f.name) for f in dataclasses.fields(MEASURED)}
    fields["cpu_us"] = {capacity.CHECK: 1.0}
    with pytest.raises(ConfigError, match="cpu_us lacks"):
        capacity.Costs(**fields)


def test_the_sizing_is_json_ready() -> None:
    document = BOOK.as_dict()
    assert document["memory_total"] == BOOK.memory_total
    assert document["shop"]["mix"] == dict(capacity.SHOP_MIX)


def test_the_unsharded_ranking_is_the_limit_of_a_large_shop() -> None:
    large = Shop(hits_per_day=10e9)
    alone = size(large)
    assert alone.ranking_cores_per_shard > large.headroom  # one master cannot keep up
    spread = size(dataclasses.replace(large, ranking_shards=16))
    assert spread.ranking_cores_per_shard == pytest.approx(alone.ranking_cores_per_shard / 16)
    assert spread.ranking_cores_per_shard < large.headroom
    assert BOOK.ranking_cores_per_shard < Shop().headroom
