"""Connections kept per thread (webtier._connections): as safe as the pool."""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator

import pytest

import webtier
from webtier._connections import checkin, checkout, pack
from webtier.config import Config
from webtier.testing import RedisServer

NOW = 1_700_000_000


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer.start() as running:
        yield running


def total(tier: webtier.WebTier, name: str) -> int:
    return sum(count for _, count in tier.counters.get(name, 86400))


def test_threads_never_share_a_connection(server: RedisServer) -> None:
    client = webtier.connect(server.url)
    tier = webtier.WebTier(client, Config(prefix="threads"))

    def work() -> None:
        for _ in range(300):
            tier.counters.record("hits", 1, now=NOW)

    workers = [threading.Thread(target=work) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert total(tier, "hits") == 2400
    webtier.disconnect(client)


def test_ended_threads_give_their_connections_back(server: RedisServer) -> None:
    client = webtier.connect(server.url)
    tier = webtier.WebTier(client, Config(prefix="churn"))
    pool = client.connection_pool
    for _ in range(50):  # short-lived threads, one after the other
        thread = threading.Thread(
            target=tier.counters.record, args=("hits", 1), kwargs={"now": NOW}
        )
        thread.start()
        thread.join()
    gc.collect()
    assert total(tier, "hits") == 50
    assert len(pool._in_use_connections) <= 1  # this thread's own, from total()
    assert len(pool._available_connections) + len(pool._in_use_connections) <= 2
    webtier.disconnect(client)


def test_a_restarted_server_is_noticed_before_writing(server: RedisServer) -> None:
    # The kept connection's socket died with the server: the write must go
    # out on a new connection, not be reported as maybe applied.
    client = webtier.connect(server.url)
    tier = webtier.WebTier(client, Config(prefix="restart", retry=webtier.RetryPolicy(attempts=0)))
    tier.counters.record("hits", 1, now=NOW)
    server.kill()
    server.launch()
    tier.counters.record("hits", 1, now=NOW)  # no OutcomeUnknown, no retry needed
    assert total(tier, "hits") == 1  # the restarted server keeps nothing
    webtier.disconnect(client)


def test_a_reentrant_call_gets_its_own_connection(server: RedisServer) -> None:
    client = webtier.connect(server.url)
    pool = client.connection_pool
    outer, held = checkout(pool)
    inner, none = checkout(pool)  # as from a signal handler mid-call
    assert inner is not outer
    assert none is None
    checkin(pool, inner, none)
    checkin(pool, outer, held)
    again, _ = checkout(pool)
    assert again is outer  # kept for the thread's next call
    checkin(pool, again, held)
    webtier.disconnect(client)


def test_a_forked_child_does_not_use_the_parents_socket(server: RedisServer) -> None:
    client = webtier.connect(server.url)
    tier = webtier.WebTier(client, Config(prefix="fork"))
    tier.counters.record("hits", 1, now=NOW)
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            tier.counters.record("hits", 10, now=NOW)
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    tier.counters.record("hits", 100, now=NOW)  # the parent's connection is intact
    assert total(tier, "hits") == 111
    webtier.disconnect(client)


def test_packing_matches_redis_py(server: RedisServer) -> None:
    client = webtier.connect(server.url)
    conn = client.connection_pool.get_connection()
    commands = [
        ("SET", "ü", 0.1),
        ("HSET", b"k", 12345678901234567890, -0.0),
        ("EVALSHA", "a" * 40, 0),
    ]
    assert pack(conn, commands) == [b"".join(conn.pack_commands(commands))]
    client.connection_pool.release(conn)
    webtier.disconnect(client)
