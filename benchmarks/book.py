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
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
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


# -- 5.2.2-5.2.3 statistics and access time ----------------------------------------------
# These handle replies as text, as the listings do: give them a client with
# decode_responses=True (update_stats compares the start key with a str).


def update_stats(
    conn: Any, context: str, type: str, value: float, timeout: float = 5
) -> list[Any] | None:
    """Listing 5.6: WATCH the start key, GET it, then MULTI with two
    temporary zsets, two ZUNIONSTOREs and three ZINCRBYs: 3 round trips. As
    printed, nothing ever sets the start key, so the hour never rolls over."""
    destination = f"stats:{context}:{type}"
    start_key = destination + ":start"
    pipe = conn.pipeline(True)
    end = time.time() + timeout
    while time.time() < end:
        try:
            pipe.watch(start_key)
            # The listing's datetime.utcnow(), without its deprecation warning.
            now = datetime.now(UTC).replace(tzinfo=None).timetuple()
            hour_start = datetime(*now[:4]).isoformat()

            existing = pipe.get(start_key)
            pipe.multi()
            if existing and existing < hour_start:
                pipe.rename(destination, destination + ":last")
                pipe.rename(start_key, destination + ":pstart")
                pipe.set(start_key, hour_start)

            tkey1 = str(uuid.uuid4())
            tkey2 = str(uuid.uuid4())
            pipe.zadd(tkey1, {"min": value})
            pipe.zadd(tkey2, {"max": value})
            pipe.zunionstore(destination, [destination, tkey1], aggregate="min")
            pipe.zunionstore(destination, [destination, tkey2], aggregate="max")

            pipe.delete(tkey1, tkey2)
            pipe.zincrby(destination, 1, "count")
            pipe.zincrby(destination, value, "sum")
            pipe.zincrby(destination, value * value, "sumsq")

            return pipe.execute()[-3:]  # type: ignore[no-any-return]
        except redis.exceptions.WatchError:
            continue
    return None


def get_stats(conn: Any, context: str, type: str) -> dict[str, float]:
    """Listing 5.7: ZRANGE WITHSCORES, then average and sample stddev."""
    key = f"stats:{context}:{type}"
    data = dict(conn.zrange(key, 0, -1, withscores=True))
    data["average"] = data["sum"] / data["count"]
    numerator = data["sumsq"] - data["sum"] ** 2 / data["count"]
    data["stddev"] = (numerator / (data["count"] - 1 or 1)) ** 0.5
    return data


@contextlib.contextmanager
def access_time(conn: Any, context: str) -> Iterator[None]:
    """Listing 5.8: time the block, update_stats, then a MULTI block ranking
    the context by its average: 4 round trips. Records nothing when the
    block raises."""
    start = time.time()
    yield

    delta = time.time() - start
    stats = update_stats(conn, context, "AccessTime", delta)
    average = stats[1] / stats[0]  # type: ignore[index]

    pipe = conn.pipeline(True)
    pipe.zadd("slowest:AccessTime", {context: average})
    pipe.zremrangebyrank("slowest:AccessTime", 0, -101)
    pipe.execute()


# -- 2.5 item view ranking -----------------------------------------------------------------


def count_view(conn: Any, item: str) -> None:
    """The view counting line of Listing 2.9's ``update_token``: a ZINCRBY of
    -1 on ``viewed:`` (lower scores rank first), one round trip per view."""
    conn.zincrby("viewed:", -1, item)


def ranked_in_top(conn: Any, item: str, limit: int = 10_000) -> bool:
    """The admission test of Listing 2.11's ``can_cache`` for an item page:
    ZRANK on ``viewed:``, one round trip per request."""
    rank = conn.zrank("viewed:", item)
    return rank is not None and rank < limit


def rescale_viewed_pass(conn: Any) -> None:
    """One pass of Listing 2.10's daemon, without its 300 s sleep: trim with
    ZREMRANGEBYRANK and halve with ZINTERSTORE, two round trips, no fence. As
    printed, the trim removes ranks 0..-20001 of the negated counts: it drops
    the *most* viewed items and keeps the rest."""
    conn.zremrangebyrank("viewed:", 0, -20001)
    conn.zinterstore("viewed:", {"viewed:": 0.5})


# -- 2.3 page cache --------------------------------------------------------------------
# Listings 2.6 and 2.8 (with the helpers the book's test code defines).


def extract_item_id(request: str) -> str | None:
    from urllib.parse import parse_qs, urlparse

    query = parse_qs(urlparse(request).query)
    values = query.get("item")
    return values[0] if values else None


def is_dynamic(request: str) -> bool:
    from urllib.parse import parse_qs, urlparse

    query = parse_qs(urlparse(request).query)
    return "_" in query


def hash_request(request: str) -> str:
    return str(hash(request))


def can_cache(conn: Any, request: str) -> bool:
    item_id = extract_item_id(request)
    if not item_id or is_dynamic(request):
        return False
    rank = conn.zrank("viewed:", item_id)
    return rank is not None and rank < 10000


def cache_request(conn: Any, request: str, callback: Any) -> Any:
    if not can_cache(conn, request):
        return callback(request)
    page_key = "cache:" + hash_request(request)
    content = conn.get(page_key)
    if not content:
        content = callback(request)
        conn.set(page_key, content, ex=300)  # setex(), deprecated in redis-py
    return content


# -- 2.1-2.2 sessions and carts -----------------------------------------------------------

# Listing 2.3: keep the newest 10 million sessions.
SESSION_LIMIT = 10_000_000


def check_token(conn: Any, token: str) -> Any:
    """Listing 2.1: HGET login: token."""
    return conn.hget("login:", token)


def update_token(conn: Any, token: str, user: str, item: str | None = None) -> None:
    """Listings 2.2 and 2.9: HSET login:, ZADD recent:, and for an item ZADD
    viewed:<token>, ZREMRANGEBYRANK (newest 25 kept), ZINCRBY viewed: -1:
    five round trips, none of them atomic with the others."""
    timestamp = time.time()
    conn.hset("login:", token, user)
    conn.zadd("recent:", {token: timestamp})
    if item:
        conn.zadd("viewed:" + token, {item: timestamp})
        conn.zremrangebyrank("viewed:" + token, 0, -26)
        conn.zincrby("viewed:", -1, item)


def add_to_cart(conn: Any, session: str, item: str, count: int) -> None:
    """Listing 2.4: HSET or HDEL cart:<session>."""
    if count <= 0:
        conn.hdel("cart:" + session, item)
    else:
        conn.hset("cart:" + session, item, count)


def clean_full_sessions_step(conn: Any, limit: int = SESSION_LIMIT) -> int:
    """Listing 2.5, one turn of the daemon's loop without its sleep: remove
    up to 100 of the oldest tokens beyond ``limit``, with their viewed lists
    and carts. Returns how many it removed. The race the book admits is
    kept: a token touched between the ZRANGE and the deletes is deleted."""
    size = conn.zcard("recent:")
    if size <= limit:
        return 0
    end_index = min(size - limit, 100)
    sessions = conn.zrange("recent:", 0, end_index - 1)
    session_keys = []
    for sess in sessions:
        sess = sess.decode() if isinstance(sess, bytes) else sess
        session_keys.append("viewed:" + sess)
        session_keys.append("cart:" + sess)
    conn.delete(*session_keys)
    conn.hdel("login:", *sessions)
    conn.zrem("recent:", *sessions)
    return len(sessions)
