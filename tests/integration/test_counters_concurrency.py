"""Writers and cleaners at once, for real, then exact totals.

Several writer processes record (one through the batched recorder) while two
cleaner processes run passes back to back. Retention is tiny (a few seconds)
so trimming, cleaning, unlisting and re-registering happen all the time;
names go idle for longer than their retention and come back. At the end:

* every slice still stored holds exactly the sum the writers logged for it
  (no increment lost, none applied twice);
* every slice young enough that no rule may drop it is stored;
* every counter that has data is in the index.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict

import pytest

import webtier
from tests.helpers.servers import all_keys, spawned_pool
from webtier._core.keys import shard_of
from webtier.config import Config, CounterSettings, Precision

SECONDS = 22.0
WRITERS = 3
NAMES = [f"page:/item/{i}" for i in range(12)] + ["páge ✓", "a:b/c d", "{tag}"]
SETTINGS = CounterSettings(precisions=(Precision(1, 3), Precision(2, 3), Precision(5, 2)), shards=8)

Log = dict[tuple[str, int, int], int]  # (name, precision, slice) -> sum


def _active(name: str, now: float) -> bool:
    # Each name is busy for 4 s, then idle for 12 s (longer than its 10 s of
    # retention, so cleaners empty and unlist it), staggered across names.
    offset = NAMES.index(name) * 2
    return int((now + offset) // 4) % 4 == 0


def _log(log: Log, name: str, count: int, now: float) -> None:
    for p in SETTINGS.precisions:
        key = (name, p.seconds, int(now // p.seconds) * p.seconds)
        log[key] = log.get(key, 0) + count


def _writer(
    url: str, prefix: str, start: float, until: float, batched: bool, seed: int
) -> tuple[Log, int]:
    time.sleep(max(0.0, start - time.time()))  # every process begins together
    rng = random.Random(seed)
    tier = webtier.WebTier(webtier.connect(url), Config(prefix=prefix, counters=SETTINGS))
    log: Log = {}
    unknown = 0
    recorder = tier.counters.recorder(flush_interval=0.05) if batched else None
    while (now := time.time()) < until:
        name = rng.choice(NAMES)
        if not _active(name, now):
            continue
        count = rng.randint(1, 5)
        if recorder is not None:
            recorder.incr(name, count, now)
            _log(log, name, count, now)
            continue
        try:
            tier.counters.record(name, count, now=now)
        except webtier.OutcomeUnknown:
            unknown += 1
        else:
            _log(log, name, count, now)
    if recorder is not None:
        report = recorder.close()
        unknown += report.lost
    return log, unknown


def _cleaner(url: str, prefix: str, start: float, until: float) -> tuple[int, int]:
    time.sleep(max(0.0, start - time.time()))
    tier = webtier.WebTier(webtier.connect(url), Config(prefix=prefix, counters=SETTINGS))
    passes = unlisted = 0
    while time.time() < until:
        unlisted += tier.counters.clean(pass_number=passes).counters_unlisted
        passes += 1
        time.sleep(0.01)
    return passes, unlisted


@pytest.mark.slow
def test_writers_and_two_cleaners_lose_nothing(redis_url: str, prefix: str) -> None:
    with spawned_pool(WRITERS + 3) as pool:
        start = time.time() + 1  # every process begins together, its client built
        until = start + SECONDS
        writers = [
            pool.apply_async(_writer, (redis_url, prefix, start, until, index == 0, index))
            for index in range(WRITERS)
        ]
        cleaners = [pool.apply_async(_cleaner, (redis_url, prefix, start, until)) for _ in range(2)]
        time.sleep(max(0.0, until - time.time()) + 0.3)
        # Read Redis right away: the smallest retention is 3 s.
        tier = webtier.WebTier(webtier.connect(redis_url), Config(prefix=prefix, counters=SETTINGS))
        stored = {p.seconds: tier.counters.get_many(NAMES, p.seconds) for p in SETTINGS.precisions}
        read_at = time.time()
        listed = set(tier.counters.names())
        keys = all_keys(redis_url, f"{prefix}:*")
        results = [w.get(timeout=60) for w in writers]
        cleaned = [c.get(timeout=60) for c in cleaners]

    assert min(passes for passes, _ in cleaned) > 100, "the cleaners barely ran"
    assert sum(unlisted for _, unlisted in cleaned) > 0, "no counter was ever unlisted"
    logged: Log = defaultdict(int)
    unknown = 0
    for log, lost in results:
        unknown += lost
        for key, total in log.items():
            logged[key] += total
    assert unknown == 0, "a healthy server lost no reply"

    checked = kept = 0
    for p in SETTINGS.precisions:
        for name in NAMES:
            for start, count in stored[p.seconds][name]:
                assert count == logged[(name, p.seconds, start)], (name, p.seconds, start)
                checked += 1
            # Younger than any rule may drop (cleanup cutoff, newest slices,
            # key TTL) at the moment Redis was read.
            young = {
                s for (n, q, s) in logged if n == name and q == p.seconds and s > read_at - p.span
            }
            missing = young - {start for start, _ in stored[p.seconds][name]}
            assert not missing, f"{name} @ {p.seconds}s lost slices {sorted(missing)}"
            kept += len(young)
    assert checked > 0
    assert kept > 0

    with_data = {_name_of(key.decode(), prefix) for key in keys if not key.endswith(b":known")}
    assert with_data, "no data left to check the index against"
    assert with_data <= listed, f"counters with data but not listed: {with_data - listed}"


def _name_of(key: str, prefix: str) -> str:
    # <prefix>:{c:<shard>}:<precision>:<name>
    name = key.split("}:", 1)[1].split(":", 1)[1]
    assert key.startswith(f"{prefix}:{{c:{shard_of(name, SETTINGS.shards)}}}")
    return name
