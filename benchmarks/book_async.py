"""The book's listings of :mod:`benchmarks.book` on redis-py's asyncio
client, as an asyncio web app would port them: the same keys, commands and
round trips, each call awaited. They are the baseline of ``webtier bench
transport``'s operations (webtier's AsyncWebTier against the book on the
asyncio client most Python apps would use)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

import redis

from benchmarks.book import PRECISION


async def update_counter(conn: Any, name: str, count: int = 1, now: float | None = None) -> None:
    """Listing 5.3: MULTI + 7 x (ZADD known:, HINCRBY) + EXEC, one round trip."""
    now = now or time.time()
    pipe = conn.pipeline()
    for prec in PRECISION:
        pnow = int(now / prec) * prec
        hash = f"{prec}:{name}"
        pipe.zadd("known:", {hash: 0})
        pipe.hincrby("count:" + hash, pnow, count)
    await pipe.execute()


async def update_stats(
    conn: Any, context: str, type: str, value: float, timeout: float = 5
) -> list[Any] | None:
    """Listing 5.6: WATCH, GET, then the MULTI block: 3 round trips (give it
    a client with decode_responses=True, as the sync port)."""
    destination = f"stats:{context}:{type}"
    start_key = destination + ":start"
    end = time.time() + timeout
    async with conn.pipeline(True) as pipe:
        while time.time() < end:
            try:
                await pipe.watch(start_key)
                now = datetime.now(UTC).replace(tzinfo=None).timetuple()
                hour_start = datetime(*now[:4]).isoformat()

                existing = await pipe.get(start_key)
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

                return (await pipe.execute())[-3:]  # type: ignore[no-any-return]
            except redis.exceptions.WatchError:
                continue
    return None


async def update_token(conn: Any, token: str, user: str, item: str | None = None) -> None:
    """Listings 2.2 and 2.9: five round trips, none atomic with the others."""
    timestamp = time.time()
    await conn.hset("login:", token, user)
    await conn.zadd("recent:", {token: timestamp})
    if item:
        await conn.zadd("viewed:" + token, {item: timestamp})
        await conn.zremrangebyrank("viewed:" + token, 0, -26)
        await conn.zincrby("viewed:", -1, item)
