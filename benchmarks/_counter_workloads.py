"""Workloads and data sets of the counters benchmark.

Workloads are module-level context managers taking a URL, so that
``functools.partial(workload, url)`` pickles into a worker process, where it
opens a client of its own. Data sets hold the same samples in both layouts:
webtier's is written through webtier's API, the book's is what
``update_counter`` would have left, written in bulk.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

import redis

from benchmarks import book
from benchmarks._loops import Loop
from webtier.connect import connect
from webtier.sync import WebTier
from webtier.types import FlushReport

X = TypeVar("X")

# Unbatched recording cycles through these names, so every second each of
# them opens new slices, as a site's page counters do.
NAMES = tuple(f"page:/item/{i}" for i in range(100))
RECORDS_PER_STEP = 10
# "A few" hot counters for the batched recorder.
HOT_NAMES = NAMES[:5]
INCRS_PER_STEP = 1000

DAY = 86400


def batches(items: Sequence[X], size: int) -> list[Sequence[X]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


@contextlib.contextmanager
def tier_on(url: str) -> Iterator[WebTier]:
    client = connect(url)
    try:
        yield WebTier(client)
    finally:
        client.close()


@contextlib.contextmanager
def client_on(url: str, **options: Any) -> Iterator[redis.Redis]:
    client: redis.Redis = connect(url, **options)  # type: ignore[assignment]
    try:
        yield client
    finally:
        client.close()


# -- workloads --------------------------------------------------------------------------


@contextlib.contextmanager
def webtier_record(url: str) -> Iterator[Loop]:
    """``tier.counters.record(name, 1)``: one script call per increment."""
    with tier_on(url) as tier:
        record = tier.counters.record
        record(NAMES[0], 1)  # loads the script: the first call is not a steady one
        turns = itertools.cycle(batches(NAMES, RECORDS_PER_STEP))

        def step() -> None:
            for name in next(turns):
                record(name, 1)

        yield Loop(step, RECORDS_PER_STEP)


@contextlib.contextmanager
def book_record(url: str) -> Iterator[Loop]:
    """The book's ``update_counter(conn, name)``: one MULTI block per increment."""
    with client_on(url) as conn:
        update_counter = book.update_counter
        turns = itertools.cycle(batches(NAMES, RECORDS_PER_STEP))

        def step() -> None:
            for name in next(turns):
                update_counter(conn, name)

        yield Loop(step, RECORDS_PER_STEP)


@contextlib.contextmanager
def webtier_recorder(url: str) -> Iterator[Loop]:
    """``recorder.incr(name)`` on a few names; the closing flush is timed."""
    with tier_on(url) as tier:
        recorder = tier.counters.recorder()
        try:
            incr = recorder.incr
            block = HOT_NAMES * (INCRS_PER_STEP // len(HOT_NAMES))

            def step() -> None:
                for name in block:
                    incr(name)

            yield Loop(step, len(block), finish=recorder.close)
        finally:
            recorder.close()


@contextlib.contextmanager
def webtier_get(url: str, name: str, precision: int) -> Iterator[Loop]:
    with tier_on(url) as tier:
        get = tier.counters.get
        yield Loop(lambda: get(name, precision))


@contextlib.contextmanager
def book_get(url: str, name: str, precision: int) -> Iterator[Loop]:
    with client_on(url) as conn:
        get_counter = book.get_counter
        yield Loop(lambda: get_counter(conn, name, precision))


# -- data sets ---------------------------------------------------------------------------

Event = tuple[str, float]  # one increment of 1: counter name, time


def spread_events(name: str, samples: int, every: int, now: float) -> list[Event]:
    """``samples`` increments of ``name``, one per ``every`` seconds up to now."""
    first = (int(now) // every - samples + 1) * every
    return [(name, float(first + k * every)) for k in range(samples)]


# Ages (seconds before now) of the live counters' increments in the cleanup
# set: each live counter then holds 8 stale samples (4 at 1 s, 2 at 5 s, 1 at
# 1 min, 1 at 5 min) among 41. The newest are a few seconds old, so that a
# long pass does not see them go stale under it.
LIVE_AGES = (0, 5, 10, 200, 400, 1000, 3 * DAY)
# Dead counters: one increment older than the longest history kept (120
# days), so every sample goes and the counter leaves the index.
DEAD_AGE = 200 * DAY
DEAD_EVERY = 10  # one counter in 10 is dead


def cleanup_events(counters: int, now: float) -> list[Event]:
    events: list[Event] = []
    for i in range(counters):
        ages = (DEAD_AGE,) if i % DEAD_EVERY == DEAD_EVERY - 1 else LIVE_AGES
        events += [(f"clean:{i}", now - age) for age in ages]
    return events


def memory_events(counters: int, samples: int, now: float) -> list[Event]:
    """A day apart, so every precision gets ``samples`` distinct slices."""
    return [e for i in range(counters) for e in spread_events(f"mem:{i}", samples, DAY, now)]


def _check_flushed(report: FlushReport) -> None:
    if report.kept or report.lost:
        raise RuntimeError(f"loading the data set failed: {report}")


def load_webtier(url: str, events: Sequence[Event]) -> None:
    """Every event through webtier's batched recorder, flushed every 20,000."""
    with tier_on(url) as tier:
        # No flush but ours: the reports are checked.
        recorder = tier.counters.recorder(flush_interval=3600, max_pending=len(events) + 1)
        try:
            incr = recorder.incr
            for chunk in batches(events, 20_000):
                for name, at in chunk:
                    incr(name, 1, now=at)
                _check_flushed(recorder.flush())
        finally:
            _check_flushed(recorder.close())


def load_book(url: str, events: Iterable[Event]) -> None:
    """What ``book.update_counter(conn, name, 1, now=at)`` would store for
    every event (same keys, fields and counts), written in bulk."""
    hashes: dict[str, dict[int, int]] = defaultdict(dict)
    known: dict[str, int] = {}
    for name, at in events:
        for prec in book.PRECISION:
            member = f"{prec}:{name}"
            known[member] = 0
            fields = hashes["count:" + member]
            pnow = int(at / prec) * prec
            fields[pnow] = fields.get(pnow, 0) + 1
    with client_on(url) as conn:
        pipe = conn.pipeline(transaction=False)
        for chunk in batches(list(hashes.items()), 1000):
            for key, fields in chunk:
                pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
            pipe.execute()
        for members in batches(list(known), 10_000):
            pipe.zadd("known:", dict.fromkeys(members, 0))
        pipe.execute()


def count_webtier_samples(url: str, names: Sequence[str]) -> int:
    with tier_on(url) as tier:
        precisions = [p.seconds for p in tier.config.counters.precisions]
        return sum(
            len(samples)
            for precision in precisions
            for chunk in batches(names, 1000)
            for samples in tier.counters.get_many(chunk, precision).values()
        )


def count_book_samples(url: str) -> int:
    with client_on(url, decode_responses=True) as conn:
        pipe = conn.pipeline(transaction=False)
        for key in conn.scan_iter(match="count:*", count=1000):
            pipe.hlen(key)
        return sum(pipe.execute())
