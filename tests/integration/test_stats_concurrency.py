"""Writers with skewed clocks, for real, across many period rollovers; then
exact figures.

Four writer processes (one on the asyncio API) record into the same contexts
for 12 s, with periods of 1 s so the period turns a dozen times under them. Their
clocks are skewed on purpose (by -3.7 s, 0, +1.3 s and +1 h): the server's
clock alone must decide the period. Every write returns the period it landed
in; at the end, for every (context, period):

* count, sum, min, max, errors and every histogram bucket are exactly what
  the writers logged (nothing lost, nothing applied twice or in another
  period), and the standard deviation matches the logged values';
* every period lies within the server's time of the run;
* every context with data in a period is listed for rankings, and the
  ranking over the whole run is the exact one.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import statistics
import time
from collections import defaultdict

import pytest

import webtier
from webtier._core.keys import shard_of
from webtier.config import Clock, Config, StatsSettings
from webtier.stats.histogram import Histogram

SECONDS = 12.0
SKEWS = (-3.7, 0.0, 1.3, 3600.0)
CONTEXTS = [f"/page/{i}" for i in range(10)] + ["/ünï {x}"]
# keep: far more periods than a run can span, even when slow process starts
# stretch it (an expired first period would look like lost writes).
SETTINGS = StatsSettings(period=1, keep=600, shards=2)
ACCESS = "AccessTime"

Entry = tuple[str, int, float, bool]  # context, period start, value, failed


def _running(until: float, began: float, writes: int) -> bool:
    """Whether a writer goes on: until the common deadline, and in any case
    for most of the run's length and 200 writes after its own start (a
    process that started late on a loaded machine still sees the period turn)."""
    now = time.time()
    return now < until or now < began + SECONDS * 0.8 or writes < 200


def _value(rng: random.Random) -> float:
    # Multiples of 1/1024: every sum is exact in doubles, whatever the order.
    return rng.randint(1, 4000) / 1024


def _writer(url: str, prefix: str, until: float, skew: float, seed: int) -> list[Entry]:
    clock = Clock(wall=lambda: time.time() + skew)  # this process's clock is off
    rng = random.Random(seed)
    client = webtier.connect(url)
    tier = webtier.WebTier(client, Config(prefix=prefix, stats=SETTINGS, clock=clock))
    log: list[Entry] = []
    try:
        began = time.time()
        while _running(until, began, len(log)):
            context, value, failed = rng.choice(CONTEXTS), _value(rng), rng.random() < 0.1
            recorded = tier.stats.record(context, ACCESS, value, failed=failed)
            log.append((context, recorded.start, value, failed))
    finally:
        webtier.disconnect(client)
    return log


def _async_writer(url: str, prefix: str, until: float, skew: float, seed: int) -> list[Entry]:
    clock = Clock(wall=lambda: time.time() + skew)

    async def run() -> list[Entry]:
        rng = random.Random(seed)
        client = webtier.connect_async(url)
        tier = webtier.AsyncWebTier(client, Config(prefix=prefix, stats=SETTINGS, clock=clock))
        log: list[Entry] = []
        began = time.time()
        while _running(until, began, len(log)):
            context, value, failed = rng.choice(CONTEXTS), _value(rng), rng.random() < 0.1
            recorded = await tier.stats.record(context, ACCESS, value, failed=failed)
            log.append((context, recorded.start, value, failed))
        await client.aclose()
        return log

    return asyncio.run(run())


def _server_time(url: str) -> float:
    client = webtier.connect(url)
    try:
        seconds, micros = client.time()  # type: ignore[misc]
        return float(seconds) + micros / 1e6
    finally:
        webtier.disconnect(client)


@pytest.mark.slow
def test_skewed_writers_across_rollovers_lose_nothing(redis_url: str, prefix: str) -> None:
    began = _server_time(redis_url)
    until = time.time() + SECONDS + 2  # processes take a moment to start
    context = multiprocessing.get_context("spawn")
    with context.Pool(len(SKEWS)) as pool:
        jobs = [
            pool.apply_async(
                _async_writer if index == len(SKEWS) - 1 else _writer,
                (redis_url, prefix, until, skew, index),
            )
            for index, skew in enumerate(SKEWS)
        ]
        logs = [job.get(timeout=SECONDS + 90) for job in jobs]
    ended = _server_time(redis_url)

    expected: dict[tuple[str, int], list[tuple[float, bool]]] = defaultdict(list)
    for log in logs:
        assert len(log) > 100, "a writer barely ran"
        for context_name, start, value, failed in log:
            expected[(context_name, start)].append((value, failed))
    starts = sorted({start for _, start in expected})
    assert len(starts) >= 8, f"the period turned only {len(starts) - 1} times"
    period = SETTINGS.period
    assert starts[0] >= int(began // period) * period
    assert starts[-1] <= ended

    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, Config(prefix=prefix, stats=SETTINGS))
    # The window counts back from the server's clock when it is read, which
    # a loaded machine may reach seconds after ``ended``: size it then, with
    # one period to spare (extra periods must simply hold nothing).
    periods = (int(_server_time(redis_url)) - starts[0]) // period + 2
    stored = tier.stats.series_many(CONTEXTS, ACCESS, periods=periods)
    checked = 0
    for context_name, series in stored.items():
        for summary in series:
            samples = expected.get((context_name, summary.start), [])
            values = [v for v, _ in samples]
            assert summary.count == len(values), (context_name, summary.start)
            if not values:
                continue
            assert summary.sum == sum(values)
            assert (summary.min, summary.max) == (min(values), max(values))
            assert summary.errors == sum(failed for _, failed in samples)
            exact = Histogram.of(values, SETTINGS.sub_buckets)
            assert dict(summary.histogram.counts) == dict(exact.counts)  # type: ignore[union-attr]
            if len(values) > 1:
                assert summary.stddev == pytest.approx(statistics.stdev(values), rel=1e-9)
            checked += 1
    assert checked == len(expected), "some writes landed in periods nobody logged"

    # Rankings: every context with data in a period is listed in its shard's
    # listing for it, and slowest() over the whole run is the exact ranking.
    try:
        for start in starts:
            listed = set()
            for shard in range(SETTINGS.shards):
                route = f"{prefix}:{{s:{shard}}}"
                key = tier.config.keys.stats_contexts(route, period, start, ACCESS)
                members = {m.decode() for m in client.smembers(key)}
                assert all(shard_of(name, SETTINGS.shards) == shard for name in members)
                listed |= members
            assert listed == {c for (c, s) in expected if s == start}, start
        # Periods of 1 s: by now the server's clock may have moved on.
        since = (int(_server_time(redis_url)) - starts[0]) // period + 2
        ranking = tier.stats.slowest(len(CONTEXTS), periods=since)
    finally:
        webtier.disconnect(client)
    values: dict[str, list[float]] = defaultdict(list)
    for (context_name, _), samples in expected.items():
        values[context_name] += [v for v, _ in samples]
    exact = sorted(((c, sum(v) / len(v)) for c, v in values.items()), key=lambda x: -x[1])
    assert [c for c, _ in ranking] == [c for c, _ in exact]
    assert [s for _, s in ranking] == pytest.approx([s for _, s in exact], rel=1e-12)
