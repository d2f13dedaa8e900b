"""Workloads and data sets of the statistics benchmark.

Workloads are module-level context managers taking a URL, so that
``functools.partial(workload, url)`` pickles into a worker process, where it
opens a client of its own. Every side records the same values, in the same
order, into the same contexts.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Iterator, Sequence

from benchmarks import book
from benchmarks._counter_workloads import client_on
from benchmarks._loops import Loop
from webtier.config import ACCESS_TIME, Config, StatsSettings
from webtier.connect import connect
from webtier.sync import WebTier

# A shop's pages: each step records one value into each of 10 of them.
CONTEXTS = tuple(f"/shop/page-{i}/{{id}}" for i in range(100))
PER_STEP = 10
# Page times in seconds, log-normal around 18 ms: a realistic spread of
# histogram buckets (about a hundred after a few thousand values).
_rng = random.Random(5)
VALUES = tuple(_rng.lognormvariate(-4.0, 0.6) for _ in range(1000))


def settings(histograms: bool = True) -> StatsSettings:
    return StatsSettings(histograms=histograms)


@contextlib.contextmanager
def tier_on(url: str, histograms: bool = True) -> Iterator[WebTier]:
    client = connect(url)
    try:
        yield WebTier(client, Config(stats=settings(histograms)))
    finally:
        client.close()


def _turns() -> Iterator[tuple[Sequence[str], Sequence[float]]]:
    contexts = itertools.cycle([CONTEXTS[i : i + PER_STEP] for i in range(0, 100, PER_STEP)])
    values = itertools.cycle([VALUES[i : i + PER_STEP] for i in range(0, 1000, PER_STEP)])
    return zip(contexts, values, strict=False)


@contextlib.contextmanager
def webtier_record(url: str, histograms: bool = True) -> Iterator[Loop]:
    """``tier.stats.record(context, "AccessTime", value)``: one script call."""
    with tier_on(url, histograms) as tier:
        record = tier.stats.record
        record(CONTEXTS[0], ACCESS_TIME, VALUES[0])  # loads the script
        turns = _turns()

        def step() -> None:
            contexts, values = next(turns)
            for context, value in zip(contexts, values, strict=True):
                record(context, ACCESS_TIME, value)

        yield Loop(step, PER_STEP)


@contextlib.contextmanager
def webtier_batched(url: str, flush_interval: float = 0.1) -> Iterator[Loop]:
    """``recorder.record(context, "AccessTime", value)`` on a
    ``tier.stats.recorder()``: values summed in process, each context's
    merged with one script call per flush (from the recorder's thread, which
    shares the process); the last flush is timed too."""
    with tier_on(url) as tier, tier.stats.recorder(flush_interval=flush_interval) as recorder:
        tier.stats.record(CONTEXTS[0], ACCESS_TIME, VALUES[0])  # loads record's script
        recorder.record(CONTEXTS[0], ACCESS_TIME, VALUES[0])
        recorder.flush()  # and the merge's
        record = recorder.record
        turns = _turns()

        def step() -> None:
            contexts, values = next(turns)
            for context, value in zip(contexts, values, strict=True):
                record(context, ACCESS_TIME, value)

        yield Loop(step, PER_STEP, finish=recorder.flush)


@contextlib.contextmanager
def book_record(url: str) -> Iterator[Loop]:
    """The book's ``update_stats``: WATCH, GET, then the MULTI block."""
    with client_on(url, decode_responses=True) as conn:
        update_stats = book.update_stats
        turns = _turns()

        def step() -> None:
            contexts, values = next(turns)
            for context, value in zip(contexts, values, strict=True):
                update_stats(conn, context, ACCESS_TIME, value)

        yield Loop(step, PER_STEP)


@contextlib.contextmanager
def webtier_access(url: str) -> Iterator[Loop]:
    """``with tier.stats.access_time(context): pass``."""
    with tier_on(url) as tier:
        access_time = tier.stats.access_time
        turns = itertools.cycle([CONTEXTS[i : i + PER_STEP] for i in range(0, 100, PER_STEP)])
        with access_time(CONTEXTS[0]):
            pass  # loads the script

        def step() -> None:
            for context in next(turns):
                with access_time(context):
                    pass

        yield Loop(step, PER_STEP)


@contextlib.contextmanager
def book_access(url: str) -> Iterator[Loop]:
    """The book's ``access_time`` context manager: update_stats, then a
    MULTI block ranking the context."""
    with client_on(url, decode_responses=True) as conn:
        access_time = book.access_time
        turns = itertools.cycle([CONTEXTS[i : i + PER_STEP] for i in range(0, 100, PER_STEP)])

        def step() -> None:
            for context in next(turns):
                with access_time(conn, context):
                    pass

        yield Loop(step, PER_STEP)


@contextlib.contextmanager
def webtier_slowest(url: str, n: int) -> Iterator[Loop]:
    with tier_on(url) as tier:
        slowest = tier.stats.slowest
        yield Loop(lambda: slowest(n))


# -- data sets ---------------------------------------------------------------------------


def load_webtier(url: str, contexts: int, samples: int, histograms: bool) -> None:
    """``samples`` values into each of ``contexts`` contexts, through the API."""
    with tier_on(url, histograms) as tier:
        record = tier.stats.record
        for context in CONTEXTS[:contexts]:
            for value in VALUES[:samples]:
                record(context, ACCESS_TIME, value)


def load_book(url: str, contexts: int, samples: int) -> None:
    """What ``update_stats`` leaves for the same values (its five-member
    zset per context), written in bulk: the book's own call is 3 round trips."""
    values = VALUES[:samples]
    record = {
        "min": min(values),
        "max": max(values),
        "count": float(len(values)),
        "sum": sum(values),
        "sumsq": sum(v * v for v in values),
    }
    with client_on(url) as conn:
        pipe = conn.pipeline(transaction=False)
        for context in CONTEXTS[:contexts]:
            pipe.zadd(f"stats:{context}:{ACCESS_TIME}", record)
        pipe.execute()


def key_bytes(url: str, pattern: str) -> int:
    """``MEMORY USAGE`` summed over the keys matching ``pattern``: exact per
    key (the bytes of its value, name and dict entry), where ``used_memory``
    deltas of a few hundred keys drown in the allocator's noise."""
    with client_on(url) as conn:
        keys = list(conn.scan_iter(match=pattern, count=1000))
        pipe = conn.pipeline(transaction=False)
        for key in keys:
            pipe.memory_usage(key, samples=0)
        return sum(pipe.execute())
