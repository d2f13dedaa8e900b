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
import json
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


# -- 2.4 row cache ----------------------------------------------------------------------


def schedule_row_cache(conn: Any, row_id: str, delay: float) -> None:
    """Listing 2.7: the row's delay in ``delay:``, due now in ``schedule:``."""
    conn.zadd("delay:", {row_id: delay})
    conn.zadd("schedule:", {row_id: time.time()})


def cache_rows_step(conn: Any, inventory_get: Any) -> bool:
    """One turn of Listing 2.8's loop; False where the daemon would sleep
    50 ms (nothing due). Per row: ZRANGE, ZSCORE, the database query, ZADD
    and SET, one round trip each. ``conn`` must decode replies.

    ``inventory_get(row_id)`` stands for ``Inventory.get(row_id)``; its
    ``to_dict()`` is the dict it returns. ``json.dumps`` gets ``default=str``
    so that decimals and dates can be written at all (the listing leaves the
    row's types out); a row with no delay still crashes, as printed."""
    next = conn.zrange("schedule:", 0, 0, withscores=True)
    now = time.time()
    if not next or next[0][1] > now:
        return False
    row_id = next[0][0]
    delay = conn.zscore("delay:", row_id)
    if delay <= 0:
        conn.zrem("delay:", row_id)
        conn.zrem("schedule:", row_id)
        conn.delete("inv:" + row_id)
        return True
    row = inventory_get(row_id)
    conn.zadd("schedule:", {row_id: now + delay})
    conn.set("inv:" + row_id, json.dumps(row, default=str))
    return True
