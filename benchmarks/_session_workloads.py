"""Workloads and data sets of the sessions benchmark.

Workloads are module-level context managers taking a URL, so that
``functools.partial(workload, url)`` pickles into a worker process, where it
opens a client of its own and its own sessions. Both sides touch the same
items in the same order.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import uuid
from collections.abc import Iterator
from typing import Any

from benchmarks import book
from benchmarks._counter_workloads import client_on
from benchmarks._loops import Loop
from webtier._core.keys import shard_of
from webtier.config import Config, SessionSettings
from webtier.connect import connect
from webtier.sessions.layout import VIEWED_SLACK, timeouts
from webtier.sessions.tokens import new_session_id, new_token
from webtier.sync import WebTier

ITEMS = tuple(f"item:{i}" for i in range(10_000))
SESSIONS_PER_PROCESS = 200
PER_STEP = 10
VIEWED = 25  # the book's, and the default
# What a full webtier session holds at most between two trims of its viewed
# items (session_touch.lua): the memory row measures that, the worst case.
HELD = VIEWED + VIEWED_SLACK
CART = (("item:1", 1), ("item:22", 2), ("item:333", 3))


def settings() -> SessionSettings:
    return SessionSettings()


@contextlib.contextmanager
def tier_on(url: str) -> Iterator[WebTier]:
    client = connect(_with_url_timeout(url))
    try:
        yield WebTier(client, Config(sessions=settings()))
    finally:
        client.close()


def _items() -> Iterator[str]:
    return itertools.cycle(ITEMS[i * 7 % len(ITEMS)] for i in range(len(ITEMS)))


def _with_url_timeout(url: str) -> str:
    # A machine shared with other work can stall a client for seconds; the
    # bench measures throughput, and a lost reply must not end the run.
    return url + ("&" if "?" in url else "?") + "socket_timeout=60"


def _new_sessions(tier: WebTier) -> list[str]:
    return [tier.sessions.new(user=f"user:{n}") for n in range(SESSIONS_PER_PROCESS)]


def _book_sessions(conn: Any) -> list[str]:
    """Sessions as the book makes them: a uuid4 token, then update_token."""
    tokens = [str(uuid.uuid4()) for _ in range(SESSIONS_PER_PROCESS)]
    for n, token in enumerate(tokens):
        book.update_token(conn, token, f"user:{n}")
    return tokens


@contextlib.contextmanager
def webtier_touch(url: str) -> Iterator[Loop]:
    """``tier.sessions.touch(token, item=...)``: one round trip."""
    with tier_on(url) as tier:
        tokens = itertools.cycle(_new_sessions(tier))
        touch = tier.sessions.touch
        items = _items()

        def step() -> None:
            for _ in range(PER_STEP):
                touch(next(tokens), item=next(items))

        yield Loop(step, PER_STEP)


@contextlib.contextmanager
def book_touch(url: str) -> Iterator[Loop]:
    """The book's ``update_token`` with an item: five round trips."""
    with client_on(url, decode_responses=True, socket_timeout=60) as conn:
        tokens = itertools.cycle(_book_sessions(conn))
        items = _items()

        def step() -> None:
            for n in range(PER_STEP):
                book.update_token(conn, next(tokens), f"user:{n}", next(items))

        yield Loop(step, PER_STEP)


@contextlib.contextmanager
def webtier_check(url: str) -> Iterator[Loop]:
    with tier_on(url) as tier:
        tokens = itertools.cycle(_new_sessions(tier))
        check = tier.sessions.check

        def step() -> None:
            for _ in range(PER_STEP):
                check(next(tokens))

        yield Loop(step, PER_STEP)


@contextlib.contextmanager
def book_check(url: str) -> Iterator[Loop]:
    with client_on(url, decode_responses=True, socket_timeout=60) as conn:
        tokens = itertools.cycle(_book_sessions(conn))

        def step() -> None:
            for _ in range(PER_STEP):
                book.check_token(conn, next(tokens))

        yield Loop(step, PER_STEP)


# -- data sets: sessions with 25 viewed items and a 3-line cart --------------------------


def _viewed(n: int, count: int = VIEWED) -> list[str]:
    """The items session ``n`` viewed, oldest first."""
    return [ITEMS[(n * 31 + k) % len(ITEMS)] for k in range(count)]


def load_webtier(url: str, sessions: int, batch: int = 2000) -> None:
    """``sessions`` sessions as webtier's scripts leave them after a login,
    item views that fill them (``HELD`` items, the most between trims) and
    3 cart lines (written in bulk: through the API it is
    29 round trips a session). The smoke test checks the API reads them back."""
    cfg = Config(sessions=settings())
    _, _, backstop, late = timeouts(cfg.sessions)
    now_ms = int(time.time() * 1000)
    expires = now_ms + backstop + late  # as session_touch.lua sets it
    with client_on(url) as conn:
        for start in range(0, sessions, batch):
            pipe = conn.pipeline(transaction=False)
            for n in range(start, min(start + batch, sessions)):
                token, user = new_token(), f"user:{n}"
                route = cfg.keys.session_shard(shard_of(token, cfg.sessions.shards))
                key = cfg.keys.session(route, token)
                fields: dict[Any, Any] = {"c": now_ms, "i": new_session_id(), "u": user}
                for k, item in enumerate(_viewed(n, HELD), start=1):
                    fields[f"v{item}"] = k
                fields |= {"n": HELD, "m": HELD, "e": expires}
                fields |= {f"k{item}": count for item, count in CART}
                pipe.hset(key, mapping=fields)
                pipe.pexpireat(key, expires)
                pipe.zadd(cfg.keys.session_recent(route), {token: now_ms * 1000 + n})
                users = cfg.keys.user_sessions(user, cfg.sessions.shards)
                pipe.hset(users, token, "")
                pipe.pexpire(users, backstop)
            pipe.execute()


def load_book(url: str, sessions: int, batch: int = 2000) -> None:
    """What the book's update_token and add_to_cart leave for the same
    sessions: login: and recent: entries, a viewed: zset, a cart: hash."""
    now = time.time()
    with client_on(url) as conn:
        for start in range(0, sessions, batch):
            pipe = conn.pipeline(transaction=False)
            for n in range(start, min(start + batch, sessions)):
                token = str(uuid.uuid4())
                pipe.hset("login:", token, f"user:{n}")
                pipe.zadd("recent:", {token: now + n / 1e6})
                viewed = {item: now + k / 1e3 for k, item in enumerate(_viewed(n))}
                pipe.zadd(f"viewed:{token}", viewed)
                pipe.hset(f"cart:{token}", mapping=dict(CART))
            pipe.execute()


def webtier_sessions(url: str) -> int:
    with client_on(url) as conn:
        return sum(
            int(conn.zcard(Config().keys.session_recent(Config().keys.session_shard(s))))
            for s in range(settings().shards)
        )


def book_sessions(url: str) -> int:
    with client_on(url) as conn:
        return int(conn.zcard("recent:"))
