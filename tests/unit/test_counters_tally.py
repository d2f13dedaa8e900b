from __future__ import annotations

import threading

import pytest

from webtier.counters.tally import Tally
from webtier.errors import InvalidInput, OutcomeUnknown, RedisUnavailable
from webtier.types import FlushReport


def test_sums_per_counter_and_granule() -> None:
    tally = Tally(granule=1, max_pending=100, on_full=lambda: None)
    tally.add("a", 1, 10.2)
    tally.add("a", 2, 10.9)
    tally.add("a", 5, 11.0)
    tally.add("b", -1, 10.0)
    assert sorted(tally.take()) == [("a", 3, 10.0), ("a", 5, 11.0), ("b", -1, 10.0)]
    assert tally.take() == []


def test_granule_follows_the_coarsest_common_slice() -> None:
    tally = Tally(granule=10, max_pending=100, on_full=lambda: None)
    tally.add("a", 1, 19.9)
    tally.add("a", 1, 10.0)
    tally.add("a", 1, 20.0)
    assert sorted(tally.take(), key=lambda e: e[2]) == [("a", 2, 10.0), ("a", 1, 20.0)]


def test_full_tally_asks_for_a_flush_once() -> None:
    calls: list[int] = []
    tally = Tally(granule=1, max_pending=3, on_full=lambda: calls.append(1))
    for _ in range(5):
        tally.add("a", 1, 1.0)
    assert calls == [1]
    assert tally.pending == 5


def test_bad_input_raises_and_queues_nothing() -> None:
    tally = Tally(granule=1, max_pending=3, on_full=lambda: None)
    for bad in [("", 1), ("a", 1.5), ("a\n", 1)]:
        with pytest.raises(InvalidInput):
            tally.add(bad[0], bad[1], None)  # type: ignore[arg-type]
    assert tally.pending == 0


def test_no_increment_lost_between_threads() -> None:
    tally = Tally(granule=1, max_pending=10**9, on_full=lambda: None)
    taken: list[int] = []
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            taken.extend(total for _, total, _ in tally.take())

    drainer = threading.Thread(target=drain)
    drainer.start()
    workers = [
        threading.Thread(target=lambda: [tally.add("a", 1, 5.0) for _ in range(20_000)])
        for _ in range(4)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    drainer.join()
    taken.extend(total for _, total, _ in tally.take())
    assert sum(taken) == 80_000


def test_settle_keeps_unsent_and_counts_lost() -> None:
    tally = Tally(granule=1, max_pending=100, on_full=lambda: None)
    report = tally.settle(
        [
            ([("a", 1, 1.0)], None),
            ([("b", 2, 1.0), ("c", 3, 1.0)], RedisUnavailable("down")),
            ([("d", 4, 1.0)], OutcomeUnknown("lost")),
        ]
    )
    assert report == FlushReport(sent=1, kept=2, lost=1)
    assert sorted(tally.take()) == [("b", 2, 1.0), ("c", 3, 1.0)]


def test_closed_tally_refuses() -> None:
    tally = Tally(granule=1, max_pending=100, on_full=lambda: None)
    tally.close()
    with pytest.raises(RuntimeError, match="closed"):
        tally.add("a", 1, None)
