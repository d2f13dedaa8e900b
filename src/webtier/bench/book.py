"""The book's listings, ported to Python 3, as the benchmarks' baselines.

These are *Redis in Action*'s functions as printed, with the book's keys and
its round trips: only Python 2 idioms are fixed (``zadd(key, {member:
score})``, ``.items()``, ``sorted(map(...))``), plus what running a daemon's
body once needs. Their known flaws (see SPEC.md, "Errors in the listings")
are kept on purpose: a baseline that is quietly improved measures nothing.

They use the book's global key names (``known:``, ``count:<prec>:<name>``),
so the benchmarks give them a database of their own. They are not part of
webtier's API; :mod:`webtier.book` is the book's API done right.
"""

from __future__ import annotations

import bisect
import time
from typing import Any

import redis

# Listing 5.3: the precisions, in seconds: 1 s, 5 s, 1 min, 5 min, 1 h, 5 h, 1 day.
PRECISION = [1, 5, 60, 300, 3600, 18000, 86400]
# The text's 120 samples (the printed SAMPLE_COUNT = 1 of some copies is a typo).
SAMPLE_COUNT = 120


def update_counter(conn: Any, name: str, count: int = 1, now: float | None = None) -> None:
    """Listing 5.3: one transactional pipeline, MULTI + 7 x (ZADD known:,
    HINCRBY count:<prec>:<name>) + EXEC, in one round trip."""
    now = now or time.time()
    pipe = conn.pipeline()
    for prec in PRECISION:
        pnow = int(now / prec) * prec
        hash = f"{prec}:{name}"
        pipe.zadd("known:", {hash: 0})
        pipe.hincrby("count:" + hash, pnow, count)
    pipe.execute()


def get_counter(conn: Any, name: str, precision: int) -> list[tuple[int, int]]:
    """Listing 5.4: HGETALL, then (slice start, count) pairs, oldest first."""
    hash = f"{precision}:{name}"
    data = conn.hgetall("count:" + hash)
    to_return = []
    for key, value in data.items():
        to_return.append((int(key), int(value)))
    to_return.sort()
    return to_return


def clean_counters_pass(conn: Any, passes: int = 0) -> None:
    """Listing 5.5, one pass of the daemon's outer loop (pass number
    ``passes``), without the sleep that follows it.

    Walks ``known:`` by position: ZCARD and ZRANGE for every entry, HKEYS for
    every due one, HDEL when some samples are stale, and WATCH/HLEN/MULTI/ZREM/
    EXEC when a counter was emptied. ``conn`` must decode replies
    (``decode_responses=True``): the listing handles them as text.
    """
    pipe = conn.pipeline(True)
    try:
        index = 0
        while index < conn.zcard("known:"):
            hash = conn.zrange("known:", index, index)
            index += 1
            if not hash:
                break
            hash = hash[0]
            prec = int(hash.partition(":")[0])
            bprec = int(prec // 60) or 1
            if passes % bprec:
                continue

            hkey = "count:" + hash
            cutoff = time.time() - SAMPLE_COUNT * prec
            samples = sorted(map(int, conn.hkeys(hkey)))
            remove = bisect.bisect_right(samples, cutoff)

            if remove:
                conn.hdel(hkey, *samples[:remove])
                if remove == len(samples):
                    try:
                        pipe.watch(hkey)
                        if not pipe.hlen(hkey):
                            pipe.multi()
                            pipe.zrem("known:", hash)
                            pipe.execute()
                            index -= 1
                        else:
                            pipe.unwatch()
                    except redis.exceptions.WatchError:
                        pass
    finally:
        # The daemon keeps its pipeline for ever; one pass hands its
        # connection back to the pool.
        pipe.reset()
