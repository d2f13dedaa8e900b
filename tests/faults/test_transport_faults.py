"""Faults of webtier's multiplexed client: one connection carries the
commands of every task, so a reply must never reach another command's
waiter, whatever is cancelled, cut, split, stalled or late, and each
failure must be reported as the wire's table says (a write sent and
unanswered is OutcomeUnknown, one never sent RedisUnavailable, and a write
that succeeded is applied exactly once).

Every reply is checked against its own command: ECHO of a unique value,
or INCR of a key of the operation's own (1 when applied)."""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import webtier
from tests.faults.proxy import Proxy
from tests.faults.servers import DURABLE, start_server
from webtier._core.mux import MuxClient
from webtier._core.mux.dial import pack
from webtier._core.protocol import read, write
from webtier.testing import RedisServer

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.anyio]


def echo(*values: str) -> Any:
    replies = yield read("echo", *(("ECHO", value) for value in values))
    return [reply.decode() for reply in replies]


def incr(key: str) -> Any:
    (reply,) = yield write(key, ("INCR", key), idempotent=False)
    return reply


def unique(n: int) -> list[str]:
    return [uuid.uuid4().hex for _ in range(n)]


@pytest.fixture(params=["asyncio", "uvloop"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    """asyncio's own event loop, and uvloop (the loop uvicorn[standard] runs
    on): their transports differ in how they buffer, pause and report."""
    if request.param == "uvloop":
        return ("asyncio", {"use_uvloop": True})
    return "asyncio"


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with start_server() as running:
        yield running


def tier_of(client: MuxClient, time_limit: float | None = None) -> webtier.AsyncWebTier:
    retry = webtier.RetryPolicy(time_limit=time_limit)
    return webtier.AsyncWebTier(client, webtier.Config(prefix="mux", retry=retry))


async def all_echo_right(tier: webtier.AsyncWebTier, n: int = 200) -> None:
    values = [unique(random.randint(1, 4)) for _ in range(n)]
    assert await asyncio.gather(*(tier.transport.run(echo(*v)) for v in values)) == values


# -- cancellation -------------------------------------------------------------------------


@pytest.mark.parametrize("split", [False, True], ids=["direct", "split-replies"])
async def test_ten_thousand_tasks_cancelled_at_random_points(
    server: RedisServer, split: bool
) -> None:
    # Tasks cancelled before they start, while waiting for room (the burst
    # is over the in-flight bound), before their flush, while their replies
    # come, and after their reply but before they resume: whatever completes
    # has its own replies, and the connection stays in step.
    rng = random.Random(22)
    proxy = Proxy(server.port)
    proxy.split = split
    port = await proxy.start()
    client = webtier.connect_async(f"redis://127.0.0.1:{port}/0", max_in_flight=1000)
    tier = tier_of(client)
    total = 10_000 if not split else 2_000
    try:
        # Connected first: greeted within the connect timeout however long
        # the burst below keeps this loop (and the proxy in it) busy.
        await all_echo_right(tier, 1)
        values = [unique(rng.randint(1, 4)) for _ in range(total)]
        tasks = [asyncio.create_task(tier.transport.run(echo(*v))) for v in values]
        when = {i: rng.randint(0, 12) for i in range(total) if rng.random() < 0.5}
        for turn in range(13):
            for i, at in when.items():
                if at == turn:
                    tasks[i].cancel()
            await asyncio.sleep(0)
        results = await asyncio.gather(*tasks, return_exceptions=True)
        done = 0
        for got, wanted in zip(results, values, strict=True):
            if isinstance(got, asyncio.CancelledError):
                continue
            assert got == wanted
            done += 1
        assert 0 < done < total
        await all_echo_right(tier)
        assert client.server.links[0] is not None  # type: ignore[union-attr]
        assert proxy.connections == 1  # never out of step, never reconnected
    finally:
        await client.aclose()
        await proxy.close()


# -- replies read a byte at a time ----------------------------------------------------------


@pytest.mark.parametrize("protocol", [2, 3])
async def test_replies_split_at_every_byte(server: RedisServer, protocol: int) -> None:
    proxy = Proxy(server.port)
    proxy.split = True
    port = await proxy.start()
    client = webtier.connect_async(f"redis://127.0.0.1:{port}/0?protocol={protocol}")
    tier = tier_of(client)
    try:
        token = await tier.sessions.new()  # NOSCRIPT first: loaded, sent again
        await tier.carts.set(token, "hat", 2)
        await tier.carts.set(token, "cap", 1)
        await tier.counters.record("hits", 3, now=1_700_000_000)
        await tier.stats.record("page", "AccessTime", 0.25)
        got = await asyncio.gather(
            tier.carts.get(token),  # a hash: a map in RESP3
            tier.counters.get("hits", 1),
            tier.stats.get("page", "AccessTime"),  # floats: doubles in RESP3
            tier.transport.run(echo("x" * 5000, "", "y")),
            client.execute("GET", "missing"),
        )
        assert got[0] == {"hat": 2, "cap": 1}
        assert got[1] == [(1_700_000_000, 3)]
        assert got[2].count == 1
        assert got[3] == ["x" * 5000, "", "y"]
        assert got[4] is None
        listed = f"mux:list:{token}"
        assert await client.execute("LPUSH", listed, "a") == 1
        with pytest.raises(webtier.ServerError, match="WRONGTYPE"):
            await client.execute("HGET", listed, "f")
        await all_echo_right(tier, 50)
    finally:
        await client.aclose()
        await proxy.close()


# -- a server that stalls, answers late, closes, dies ----------------------------------------


async def test_a_stall_mid_reply_closes_the_connection_as_the_table_says(
    server: RedisServer,
) -> None:
    # The first connection forwards 7 bytes of replies and then nothing:
    # after the read timeout the connection is closed; the read sent on it
    # is sent again on a new one, the write's outcome is unknown.
    proxy = Proxy(server.port)
    proxy.stall_after = 7
    port = await proxy.start()
    client = webtier.connect_async(f"redis://127.0.0.1:{port}/0", socket_timeout=0.5)
    tier = tier_of(client)
    key = f"mux:{uuid.uuid4().hex}"
    try:
        values = unique(3)
        first = asyncio.create_task(tier.transport.run(echo(*values)))
        await asyncio.sleep(0)
        written = asyncio.create_task(tier.transport.run(incr(key)))
        assert await first == values
        with pytest.raises(webtier.OutcomeUnknown):
            await written
        assert proxy.connections == 2
        await all_echo_right(tier)
        with server.client() as direct:
            assert direct.get(key) == b"1"  # it reached the server once
    finally:
        await client.aclose()
        await proxy.close()


async def test_past_the_deadline_a_call_returns_and_its_late_reply_is_dropped(
    server: RedisServer,
) -> None:
    proxy = Proxy(server.port)
    port = await proxy.start()
    client = webtier.connect_async(f"redis://127.0.0.1:{port}/0")
    tier = tier_of(client)
    keys = [f"mux:{uuid.uuid4().hex}" for _ in range(20)]
    try:
        await all_echo_right(tier, 10)
        link = client.server.links[0]  # type: ignore[union-attr]
        proxy.flowing.clear()  # replies held back
        with webtier.time_limit(0.3):
            reads = [tier.transport.run(echo(*unique(2))) for _ in range(20)]
            writes = [tier.transport.run(incr(key)) for key in keys]
            outcomes = await asyncio.gather(*reads, *writes, return_exceptions=True)
        for outcome in outcomes[:20]:  # sent, unanswered reads: not applied, nothing changed
            assert type(outcome) is webtier.RedisUnavailable
        for outcome in outcomes[20:]:  # sent, unanswered writes
            assert type(outcome) is webtier.OutcomeUnknown
        proxy.flowing.set()  # the late replies arrive, for no one
        await all_echo_right(tier)
        assert client.server.links[0] is link  # the same connection, in step
        with server.client() as direct:
            assert [direct.get(key) for key in keys] == [b"1"] * len(keys)
    finally:
        await client.aclose()
        await proxy.close()


async def flood(tier: webtier.AsyncWebTier, keys: list[str]) -> list[Any]:
    flooding = (tier.transport.run(incr(key)) for key in keys)
    return await asyncio.gather(*flooding, return_exceptions=True)


def check_applied_once(outcomes: list[Any], keys: list[str], server: RedisServer) -> dict[str, int]:
    """Each INCR against its key: 1 when it succeeded, 0 when it was
    provably not applied, 0 or 1 when unknown; never 2."""
    with server.client() as direct:
        stored = direct.mget(keys)
    seen = {"ok": 0, "not applied": 0, "unknown": 0}
    for outcome, value in zip(outcomes, stored, strict=True):
        if isinstance(outcome, webtier.OutcomeUnknown):
            assert value in (None, b"1")
            seen["unknown"] += 1
        elif isinstance(outcome, webtier.RedisUnavailable):
            assert value is None
            seen["not applied"] += 1
        else:
            assert outcome == 1
            assert value == b"1"
            seen["ok"] += 1
    return seen


BATCH, STRUCK_AT = 4000, 1500  # INCRs in one batch; the fault strikes after this many


async def half_served_batch(
    proxy: Proxy, tier: webtier.AsyncWebTier, keys: list[str], fault: Callable[[], None]
) -> list[Any]:
    """Send ``keys``' INCRs as one batch, of which the server reads the first
    ``STRUCK_AT`` (through the proxy) and answers them; then ``fault``."""
    size = len(pack([("INCR", keys[0])]))  # every key the same length
    proxy.cut_after(size * STRUCK_AT)
    answered = proxy.down_bytes + len(b":1\r\n") * STRUCK_AT
    running = asyncio.create_task(flood(tier, keys))
    while proxy.down_bytes < answered:
        await asyncio.sleep(0.01)
    await asyncio.to_thread(fault)
    return await running


async def test_the_server_closing_the_connection_mid_batch(server: RedisServer) -> None:
    proxy = Proxy(server.port)
    port = await proxy.start()
    client = webtier.connect_async(f"redis://127.0.0.1:{port}/0")
    tier = tier_of(client)
    keys = [f"mux:{uuid.uuid4().hex}" for _ in range(BATCH)]
    try:
        await all_echo_right(tier, 10)

        def kill() -> None:
            assert proxy.upstream is not None
            host, port = proxy.upstream
            with server.client() as admin:
                admin.execute_command("CLIENT", "KILL", "ADDR", f"{host}:{port}")

        outcomes = await half_served_batch(proxy, tier, keys, kill)
        seen = check_applied_once(outcomes, keys, server)
        # Answered before the kill: applied once; sent after: unknown.
        assert seen == {"ok": STRUCK_AT, "not applied": 0, "unknown": BATCH - STRUCK_AT}
        await all_echo_right(tier)  # on a new connection
    finally:
        await client.aclose()
        await proxy.close()


async def test_kill_9_mid_pipeline() -> None:
    with start_server(*DURABLE) as server:
        proxy = Proxy(server.port)
        port = await proxy.start()
        client = webtier.connect_async(f"redis://127.0.0.1:{port}/0", socket_connect_timeout=0.5)
        tier = tier_of(client, time_limit=1.0)
        keys = [f"mux:{uuid.uuid4().hex}" for _ in range(BATCH)]
        later = [f"mux:{uuid.uuid4().hex}" for _ in range(100)]
        try:
            await all_echo_right(tier, 10)
            outcomes = await half_served_batch(proxy, tier, keys, server.kill)
            unsent = await flood(tier, later)  # the server is down: nothing is sent
            server.launch()  # from its append-only file: every acknowledged write
            seen = check_applied_once(outcomes, keys, server)
            assert seen["ok"] == STRUCK_AT  # acknowledged before the kill, kept
            assert seen["unknown"] == BATCH - STRUCK_AT
            assert check_applied_once(unsent, later, server)["not applied"] == len(later)
            await all_echo_right(tier)
        finally:
            await client.aclose()
            await proxy.close()


async def test_a_server_loading_its_data_is_an_outage_not_a_wrong_url() -> None:
    # A redis-server just restarted answers every command LOADING until its
    # data is in memory (a kill -9 and restart, in the fault suite): the
    # greeting refused so is retried, never a ConfigError that ends it.
    async def loading(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while chunk := await reader.read(65536):
            commands = chunk.count(b"\r\n*") + chunk.startswith(b"*")
            writer.write(b"-LOADING Redis is loading the dataset in memory\r\n" * commands)
        writer.close()

    server = await asyncio.start_server(loading, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = webtier.connect_async(f"redis://127.0.0.1:{port}/0")
    tier = tier_of(client, time_limit=1.0)
    try:
        with pytest.raises(webtier.RedisUnavailable) as raised:
            await tier.counters.record("hits")
        assert not isinstance(raised.value, webtier.ConfigError)
        assert "LOADING" in str(raised.value.__cause__) or "loading" in str(raised.value)
    finally:
        await client.aclose()
        server.close()


# -- sizes, forks ---------------------------------------------------------------------------


async def test_replies_of_100_mb_among_small_ones(server: RedisServer) -> None:
    client = webtier.connect_async(server.url, socket_timeout=30)
    tier = tier_of(client)
    big = os.urandom(50) * (2 * 1024 * 1024 // 100) * 100  # 100 MiB
    try:
        assert await client.execute("SET", "mux:big", big) == b"OK"
        small = [unique(2) for _ in range(50)]
        got = await asyncio.gather(
            *(tier.transport.run(echo(*v)) for v in small[:25]),
            client.execute("GET", "mux:big"),
            *(tier.transport.run(echo(*v)) for v in small[25:]),
        )
        assert got[25] == big
        assert got[:25] + got[26:] == small
    finally:
        await client.aclose()


def test_a_connection_made_before_fork_is_never_used_after_it(server: RedisServer) -> None:
    loop = asyncio.new_event_loop()
    client = webtier.connect_async(server.url)
    try:
        parent_id = loop.run_until_complete(client.execute("CLIENT", "ID"))
        link = client.server.links[0]  # type: ignore[union-attr]
        assert link is not None
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: a new loop, as a forked web worker makes
            code = 1
            try:
                inherited_usable = link.usable(link.loop)
                child_loop = asyncio.new_event_loop()
                child_id = child_loop.run_until_complete(client.execute("CLIENT", "ID"))
                os.write(write_end, f"{int(inherited_usable)} {child_id}".encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        _, status = os.waitpid(pid, 0)
        answer = os.read(read_end, 100).decode().split()
        os.close(read_end)
        assert os.WEXITSTATUS(status) == 0
        assert answer[0] == "0"  # the parent's connection, not usable in the child
        assert int(answer[1]) != parent_id  # the child made its own
        # The parent's connection is untouched by the child.
        assert loop.run_until_complete(client.execute("CLIENT", "ID")) == parent_id
        assert client.server.links[0] is link  # type: ignore[union-attr]
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()
