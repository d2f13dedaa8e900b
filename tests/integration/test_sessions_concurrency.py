"""Touchers and two cleaners at once, for real: no live session is ever
deleted, and nothing is left orphaned.

Toucher processes create sessions (pushing the store far over a low cap),
put items in their carts, and above all *revive* sessions near the eviction
edge: sessions that cleaners are picking right then. The book's cleaner
deletes such a session after the touch (the race it admits); two cleaners
that each remove the excess they counted remove too much. Every session
operation first takes a number from a shared counter, so a toucher that
finds a session it created or revived gone can tell whether fewer than
LIMIT sessions were created or touched since: if so, the session was
deleted while it was among the newest LIMIT, that is, while live.
"""

from __future__ import annotations

import collections
import random
import time

import pytest

import webtier
from tests.helpers.servers import all_keys, spawned_pool
from webtier._core.keys import shard_of
from webtier.config import Config, SessionSettings
from webtier.errors import UnknownSession

SECONDS = 22.0
TOUCHERS = 3
LIMIT = 150
SETTINGS = SessionSettings(limit=LIMIT, shards=8, clean_batch=40, viewed=5)


def _writer(url: str, prefix: str, start: float, until: float, seed: int) -> dict[str, int]:
    time.sleep(max(0.0, start - time.time()))  # every process begins together
    rng = random.Random(seed)
    client = webtier.connect(url)
    tier = webtier.WebTier(client, Config(prefix=prefix, sessions=SETTINGS))
    clock = f"{prefix}:{{test}}:ops"
    created: list[str] = []
    # Sessions to verify: revived ones a few operations after the touch, new
    # ones once most of LIMIT operations have passed (near the eviction edge).
    pending: collections.deque[tuple[str, int]] = collections.deque()
    aging: collections.deque[tuple[str, int]] = collections.deque()
    found = collections.Counter[str]()
    while time.time() < until:
        ticket = int(client.incr(clock))
        choice = rng.random()
        if choice < 0.4 or len(created) < LIMIT:
            token = tier.sessions.new()
            created.append(token)
            try:
                tier.carts.set(token, f"item:{rng.randrange(5)}", rng.randint(1, 3))
            except UnknownSession:
                # Evicted before its cart: legitimately only if this process
                # stalled while LIMIT others were created or touched.
                since = int(client.get(clock) or 0) - ticket
                live = since + TOUCHERS + 1 < LIMIT
                found["deleted while live" if live else "legitimately evicted"] += 1
                continue
            found["created"] += 1
            aging.append((token, ticket))
        else:
            # A session created about LIMIT operations ago (all writers
            # together): right at the cleaners' eviction edge.
            back = LIMIT // TOUCHERS + rng.randint(-10, 10)
            token = created[max(0, len(created) - back)]
            if tier.sessions.touch(token, item=f"item:{rng.randrange(50)}"):
                found["revived"] += 1
                pending.append((token, ticket))
            else:
                found["already gone"] += 1
        due = []
        while pending and (len(pending) > 3 or time.time() >= until):
            due.append(pending.popleft())
        while aging and ticket - aging[0][1] >= LIMIT * 4 // 5:
            due.append(aging.popleft())
        for token, touched_at in due:
            alive = tier.sessions.info(token) is not None
            since = int(client.get(clock) or 0) - touched_at
            if alive:
                found["verified"] += 1
            elif since + TOUCHERS + 1 < LIMIT:
                found["deleted while live"] += 1
            else:
                found["legitimately evicted"] += 1
    webtier.disconnect(client)
    return dict(found)


def _cleaner(url: str, prefix: str, start: float, until: float) -> dict[str, int]:
    time.sleep(max(0.0, start - time.time()))
    tier = webtier.WebTier(webtier.connect(url), Config(prefix=prefix, sessions=SETTINGS))
    totals = collections.Counter[str]()
    while time.time() < until:
        report = tier.sessions.clean()
        totals["passes"] += 1
        totals["deleted"] += report.deleted
        totals["spared"] += report.spared
        # A breath between passes, as a worker takes: two cleaners spinning
        # flat out starve a loaded machine's cluster nodes into failovers.
        time.sleep(0.01)
    return dict(totals)


@pytest.mark.slow
def test_touchers_and_two_cleaners_never_delete_a_live_session(redis_url: str, prefix: str) -> None:
    with spawned_pool(TOUCHERS + 2) as pool:
        start = time.time() + 1  # every process begins together, its client built
        until = start + SECONDS
        writers = [
            pool.apply_async(_writer, (redis_url, prefix, start, until, seed))
            for seed in range(TOUCHERS)
        ]
        cleaners = [pool.apply_async(_cleaner, (redis_url, prefix, start, until)) for _ in range(2)]
        found = collections.Counter[str]()
        for writer in writers:
            found.update(writer.get(timeout=120))
        cleaned = collections.Counter[str]()
        for cleaner in cleaners:
            cleaned.update(cleaner.get(timeout=120))

    assert found["deleted while live"] == 0, (found, cleaned)
    assert found["verified"] > 100, f"too few revivals to test anything: {found}"
    assert cleaned["deleted"] > 1000, f"the cleaners barely ran: {cleaned}"

    tier = webtier.WebTier(webtier.connect(redis_url), Config(prefix=prefix, sessions=SETTINGS))
    tier.sessions.clean()
    keys = {key.decode() for key in all_keys(redis_url, f"{prefix}:*")}
    sessions = {key for key in keys if ":t:" in key}
    assert 0 < len(sessions) <= LIMIT
    client = webtier.connect(redis_url)
    try:
        indexed = set()
        for shard in range(SETTINGS.shards):
            route = tier.config.keys.session_shard(shard)
            for token in client.zrange(tier.config.keys.session_recent(route), 0, -1):
                indexed.add(tier.config.keys.session(route, token.decode()))
        # Every session is listed, every listing has its session: no orphans.
        assert sessions == indexed
        for key in sessions:
            token = key.rsplit(":", 1)[1]
            assert key.startswith(f"{prefix}:{{s:{shard_of(token, SETTINGS.shards)}}}")
            fields = set(client.hkeys(key))
            assert {b"c", b"i"} <= fields, f"a partial session: {key} {fields}"
            assert client.pttl(key) > 0, "every session key has an expiry backstop"
    finally:
        webtier.disconnect(client)
