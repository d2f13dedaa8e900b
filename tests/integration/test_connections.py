"""Connections kept idle for reuse (webtier._core.redispy): as safe as the pool."""

from __future__ import annotations

import asyncio
import os
import select
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from redis._parsers import _RESP2Parser

import webtier
import webtier.aio
from webtier._core.protocol import Op, write
from webtier._core.redispy import checkin, checkout, pack
from webtier.config import Config
from webtier.errors import ServerError
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


def test_connections_are_reused_across_threads(server: RedisServer) -> None:
    client = webtier.connect(server.url)
    tier = webtier.WebTier(client, Config(prefix="churn"))
    pool = client.connection_pool
    for _ in range(50):  # short-lived threads, one after the other
        thread = threading.Thread(
            target=tier.counters.record, args=("hits", 1), kwargs={"now": NOW}
        )
        thread.start()
        thread.join()
    assert total(tier, "hits") == 50
    assert pool._created_connections == 1
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
    outer = checkout(pool)
    inner = checkout(pool)  # as from a signal handler mid-call
    assert inner is not outer
    checkin(pool, inner)
    checkin(pool, outer)
    assert checkout(pool) is outer  # the last one in is the first one out
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


def test_idle_connections_never_starve_busy_threads(server: RedisServer) -> None:
    # 16 threads, at most 8 calls in flight, a pool of 8: the pool alone
    # copes, so webtier must too (no connection sits idle with one thread).
    client = webtier.connect(server.url, max_connections=8)
    tier = webtier.WebTier(client, Config(prefix="room"))
    in_flight = threading.Semaphore(8)
    errors: list[BaseException] = []

    def work() -> None:
        for _ in range(30):
            with in_flight:
                try:
                    tier.counters.record("hits", 1, now=NOW)
                except BaseException as error:
                    errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert total(tier, "hits") == 16 * 30
    webtier.disconnect(client)


def test_connections_go_back_to_a_pool_past_half_its_size(server: RedisServer) -> None:
    client = webtier.connect(server.url, max_connections=4)
    pool = client.connection_pool
    held = [checkout(pool) for _ in range(3)]  # 3 of 4 handed out: past half
    for conn in held:
        checkin(pool, conn)
    assert len(pool._available_connections) == 3  # none hoarded by webtier
    webtier.disconnect(client)


def test_a_blocking_pool_is_used_as_it_is(server: RedisServer) -> None:
    import redis

    pool = redis.BlockingConnectionPool(port=server.port, max_connections=2, timeout=10)
    tier = webtier.WebTier(redis.Redis(connection_pool=pool), Config(prefix="blocking"))
    for _ in range(5):
        tier.counters.record("hits", 1, now=NOW)
    assert total(tier, "hits") == 5
    assert pool.pool.qsize() == 2  # every connection back in the blocking pool's queue
    pool.disconnect()


def test_an_asyncio_burst_past_the_pool_waits_for_connections(server: RedisServer) -> None:
    """250 operations at once, each holding its connection 0.2 s, on a pool
    of 100: they wait their turn, none fails with "Too many connections"."""

    async def burst() -> list[object]:
        client = webtier.connect_async(server.url, client="redis-py")
        try:
            calls = [client.execute_command("BLPOP", f"none:{n}", 0.2) for n in range(250)]
            return await asyncio.gather(*calls)
        finally:
            await client.aclose()

    assert asyncio.run(burst()) == [None] * 250


# -- the check before a kept connection is written to ---------------------------------


def _kept(pool: Any) -> Any:
    """The connection webtier keeps idle for ``pool`` (there is one)."""
    (conn, _, _) = pool._webtier_idle.conns[-1]
    return conn


def _reply_waiting(conn: Any) -> None:
    """Leave a reply unread on ``conn``: out of step, as after a bug or a
    signal between a write and its read."""
    conn._sock.sendall(b"*1\r\n$4\r\nPING\r\n")
    deadline = time.monotonic() + 5
    while not select.select([conn._sock], [], [], 0.05)[0]:
        assert time.monotonic() < deadline, "no PONG"


@pytest.mark.parametrize("parser", ["hiredis", "python"])
def test_a_connection_with_a_reply_waiting_is_never_written_to(
    server: RedisServer, parser: str
) -> None:
    # The next reply read must be the next command's, not the stale PONG.
    options = {} if parser == "hiredis" else {"parser_class": _RESP2Parser}
    client = webtier.connect(server.url, **options)
    tier = webtier.WebTier(client, Config(prefix="stale"))
    tier.counters.record("hits", 1, now=NOW)
    conn = _kept(client.connection_pool)
    _reply_waiting(conn)
    assert total(tier, "hits") == 1  # a PONG read here would fail to parse as counts
    tier.counters.record("hits", 1, now=NOW)
    assert total(tier, "hits") == 2
    assert client.connection_pool._created_connections == 1  # reconnected, not replaced
    webtier.disconnect(client)


def test_a_connection_whose_parser_holds_a_reply_is_never_written_to(server: RedisServer) -> None:
    client = webtier.connect(server.url)
    tier = webtier.WebTier(client, Config(prefix="buffered"))
    tier.counters.record("hits", 1, now=NOW)
    conn = _kept(client.connection_pool)
    conn._parser._reader.feed(b"+PONG\r\n")  # read off the socket, not yet parsed
    assert total(tier, "hits") == 1
    webtier.disconnect(client)


def test_an_error_reply_is_a_server_error_and_the_connection_stays_in_use(
    server: RedisServer,
) -> None:
    client = webtier.connect(server.url)
    client.set("not-a-number", "x")
    tier = webtier.WebTier(client, Config(prefix="refused"))

    def incr() -> Op[Any]:
        return (yield write("not-a-number", ("INCR", "not-a-number"), idempotent=False))

    with pytest.raises(ServerError, match="not an integer"):
        tier.transport.run(incr())
    conn = _kept(client.connection_pool)
    tier.counters.record("hits", 1, now=NOW)
    assert _kept(client.connection_pool) is conn  # in step: kept and used again
    assert total(tier, "hits") == 1
    webtier.disconnect(client)


def test_an_asyncio_error_reply_is_a_server_error(server: RedisServer) -> None:
    async def scenario() -> None:
        client = webtier.connect_async(server.url)
        try:
            await client.execute("SET", "not-a-number", "x")
            tier = webtier.aio.WebTier(client, Config(prefix="refused"))

            def incr() -> Op[Any]:
                return (yield write("not-a-number", ("INCR", "not-a-number"), idempotent=False))

            with pytest.raises(ServerError, match="not an integer"):
                await tier.transport.run(incr())
            await tier.counters.record("hits", 1, now=NOW)
            assert sum(n for _, n in await tier.counters.get("hits", 86400)) == 1
        finally:
            await client.aclose()

    asyncio.run(scenario())


@pytest.mark.onlynoncluster
def test_a_client_pinned_to_one_connection_is_refused(redis_url: str) -> None:
    import redis
    import redis.asyncio

    pinned = redis.Redis.from_url(redis_url, single_connection_client=True)
    with pytest.raises(webtier.ConfigError, match="single_connection_client"):
        webtier.WebTier(pinned)
    pinned.close()

    async def pinned_async() -> None:
        client = redis.asyncio.Redis.from_url(redis_url, single_connection_client=True)
        await client.initialize()  # the asyncio client takes its connection here
        with pytest.raises(webtier.ConfigError, match="single_connection_client"):
            webtier.AsyncWebTier(client)
        await client.aclose()

    asyncio.run(pinned_async())
