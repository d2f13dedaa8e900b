"""webtier's own asyncio client (``webtier.connect_async``) on real servers:
every way of reaching one (TCP, unix socket, TLS, an ACL user, a database
number, RESP2 and RESP3), the commands of concurrent tasks coalesced into
one write, back-pressure, and a Cluster's slot map (MOVED followed, replicas
never written). Its faults are in tests/faults/test_transport_faults.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import webtier
from tests.faults.servers import make_certificate, start_server
from tests.helpers.servers import wait_for
from webtier._core.mux import MuxClient
from webtier._core.mux.link import Link
from webtier._core.mux.slots import slot_of
from webtier._core.protocol import read, write
from webtier.testing import RedisCluster, RedisServer

pytestmark = [pytest.mark.anyio, pytest.mark.needs_redis]


def echo(*values: str) -> Any:
    """An operation sending ECHO of each value as one pipeline."""
    replies = yield read("echo", *(("ECHO", value) for value in values))
    return [reply.decode() for reply in replies]


@pytest.fixture
def server(servers: dict[str, RedisServer]) -> RedisServer:
    return servers["standalone"]


@pytest.fixture
def acl_user(server: RedisServer) -> Iterator[tuple[str, str]]:
    name, password = f"u{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", name, "on", f">{password}", "~*", "+@all")
    yield name, password
    admin.execute_command("ACL", "DELUSER", name)
    admin.close()


async def test_connect_async_returns_webtiers_client_and_redispy_on_request(
    server: RedisServer,
) -> None:
    client = webtier.connect_async(server.url)
    assert isinstance(client, MuxClient)
    assert isinstance(webtier.AsyncWebTier(client).transport, webtier._core.mux.MuxTransport)
    assert await client.execute("PING") == b"PONG"
    await client.aclose()
    other = webtier.connect_async(server.url, client="redis-py")
    assert not isinstance(other, MuxClient)
    await other.aclose()


@pytest.mark.parametrize("protocol", [2, 3])
async def test_an_acl_user_a_database_and_a_client_name_in_either_protocol(
    server: RedisServer, acl_user: tuple[str, str], protocol: int
) -> None:
    name, password = acl_user
    url = f"redis://{name}:{password}@127.0.0.1:{server.port}/5?protocol={protocol}"
    client = webtier.connect_async(url, client_name=f"mux{protocol}")
    try:
        assert await client.execute("ACL", "WHOAMI") == name.encode()
        assert await client.execute("CLIENT", "GETNAME") == f"mux{protocol}".encode()
        info = await client.execute("CLIENT", "INFO")
        assert b" db=5 " in info
        assert f" resp={protocol}".encode() in info
        tier = webtier.AsyncWebTier(client, webtier.Config(prefix=f"p{protocol}{name}"))
        token = await tier.sessions.new()
        await tier.sessions.update(token, {"a": 1})
        await tier.carts.set(token, "hat", 2)
        assert await tier.carts.get(token) == {"hat": 2}  # a hash: a map in RESP3
        assert await tier.sessions.data(token) == {"a": 1}
    finally:
        await client.aclose()
    pattern = f"p{protocol}{name}:*"
    with server.client(db=5) as five, server.client(db=0) as zero:
        assert five.keys(pattern)
        assert not zero.keys(pattern)


async def test_wrong_credentials_and_a_missing_database_say_what_is_wrong(
    server: RedisServer, acl_user: tuple[str, str]
) -> None:
    name, _ = acl_user
    wrong = webtier.connect_async(f"redis://{name}:nope@127.0.0.1:{server.port}/0")
    with pytest.raises(webtier.RedisUnavailable, match="credentials"):
        await webtier.AsyncWebTier(wrong).counters.record("x")
    await wrong.aclose()
    missing = webtier.connect_async(f"redis://127.0.0.1:{server.port}/999")
    with pytest.raises(webtier.ConfigError, match="database"):
        await webtier.AsyncWebTier(missing).counters.record("x")
    await missing.aclose()


async def test_a_unix_socket(tmp_path: Path) -> None:
    path = tmp_path / "redis.sock"
    with start_server("--unixsocket", str(path), "--unixsocketperm", "700"):
        client = webtier.connect_async(f"unix://{path}?db=2")
        tier = webtier.AsyncWebTier(client)
        try:
            assert await tier.transport.run(echo("a", "b")) == ["a", "b"]
            assert b" db=2 " in await client.execute("CLIENT", "INFO")
        finally:
            await client.aclose()


async def test_tls_and_a_plain_server_named_as_such(tmp_path: Path, server: RedisServer) -> None:
    certificate = make_certificate(tmp_path)
    with start_server(tls=certificate) as tls:
        client = webtier.connect_async(tls.url)
        try:
            tier = webtier.AsyncWebTier(client, webtier.Config(prefix="tls"))
            await tier.counters.record("hits", now=1_700_000_000)
            assert await tier.counters.get("hits", 1) == [(1_700_000_000, 1)]
        finally:
            await client.aclose()
    plain = webtier.connect_async(f"rediss://127.0.0.1:{server.port}/0?ssl_cert_reqs=none")
    with pytest.raises(webtier.ConfigError, match="TLS"):
        await webtier.AsyncWebTier(plain).counters.record("x")
    await plain.aclose()


def test_options_it_does_not_take_are_refused(server: RedisServer) -> None:
    with pytest.raises(webtier.ConfigError, match="single_connection_client"):
        webtier.connect_async(server.url, single_connection_client=True)
    with pytest.raises(webtier.ConfigError, match="bytes"):
        webtier.connect_async(server.url, decode_responses=True)
    with pytest.raises(webtier.ConfigError, match="client must be"):
        webtier.connect_async(server.url, client="other")  # type: ignore[call-overload]


async def test_commands_of_one_loop_iteration_go_in_one_write(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = webtier.connect_async(server.url)
    tier = webtier.AsyncWebTier(client)
    await client.execute("PING")  # connected: what follows needs no connect
    link = client.server.links[0]  # type: ignore[union-attr]
    assert link is not None
    writes: list[bytes] = []
    original = link.transport.write  # type: ignore[union-attr]

    def counted(data: Any) -> None:
        writes.append(bytes(data))
        original(data)

    monkeypatch.setattr(link.transport, "write", counted)
    values = [[f"{i}-{j}" for j in range(i % 4 + 1)] for i in range(200)]
    results = await asyncio.gather(*(tier.transport.run(echo(*v)) for v in values))
    assert results == values
    assert len(writes) == 1  # 200 operations, their 500 commands, one write
    await client.aclose()


async def test_a_burst_waits_for_room_and_never_exceeds_the_bounds(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = webtier.connect_async(server.url, max_in_flight=16, max_queued_bytes=2048)
    tier = webtier.AsyncWebTier(client)
    seen: list[tuple[int, int]] = []
    original = Link.send

    def bounded(self: Link, packed: bytes, count: int) -> Any:
        pending = original(self, packed, count)
        seen.append((self.in_flight, self.queued_bytes))
        return pending

    monkeypatch.setattr(Link, "send", bounded)
    big = "x" * 300
    values = [[f"{i}", big] for i in range(2000)]
    try:
        results = await asyncio.gather(*(tier.transport.run(echo(*v)) for v in values))
    finally:
        await client.aclose()
    assert results == values
    assert max(flight for flight, _ in seen) <= 16
    assert max(queued for _, queued in seen) <= 2048


async def test_a_client_of_several_connections_per_node(server: RedisServer) -> None:
    client = webtier.connect_async(server.url, connections=3)
    tier = webtier.AsyncWebTier(client)
    try:
        for _ in range(3):
            values = [[f"{i}", f"{i}!"] for i in range(300)]
            assert await asyncio.gather(*(tier.transport.run(echo(*v)) for v in values)) == values
        opened = [link for link in client.server.links if link is not None]  # type: ignore[union-attr]
        assert 1 <= len(opened) <= 3
    finally:
        await client.aclose()


async def test_replicated_cancelled_while_it_waits_closes_its_connection(
    server: RedisServer,
) -> None:
    # replicated() waits on a connection of its own, which WAIT blocks: a
    # call cancelled meanwhile (a time limit of its caller's) left it open,
    # out of the client's reach, until collected after the event loop ended.
    client = webtier.connect_async(server.url)
    admin = server.client()

    def waiting() -> list[Any]:
        return [c for c in admin.client_list() if c["cmd"] == "wait"]

    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await client.replicated(1, 30)  # no replica: WAIT blocks for 30 s
        assert waiting()  # it was sent
    finally:
        await client.aclose()
    deadline = asyncio.get_running_loop().time() + 5
    while waiting() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)
    assert waiting() == []
    admin.close()


# -- Cluster ------------------------------------------------------------------------------


@pytest.mark.onlycluster
async def test_a_stale_slot_map_is_corrected_by_moved(redis_url: str, prefix: str) -> None:
    client = webtier.connect_async(redis_url)
    tier = webtier.AsyncWebTier(client, webtier.Config(prefix=prefix))
    try:
        await tier.counters.record("hits", now=1_700_000_000)
        slots = client.slots
        assert slots is not None
        # Point every slot at one wrong master: each command is answered MOVED.
        wrong = sorted(slots.masters)
        slots.owners[:] = [wrong[(wrong.index(o) + 1) % len(wrong)] for o in slots.owners]  # type: ignore[arg-type]
        stale = slots
        await tier.counters.record("hits", now=1_700_000_000)
        assert client.slots is not stale  # read again
        assert await tier.counters.get("hits", 1) == [(1_700_000_000, 2)]
        assert await client.execute("INCR", f"{prefix}:n", route=f"{prefix}:n") == 1
    finally:
        await client.aclose()


@pytest.mark.onlycluster
async def test_replicas_are_never_written(
    cluster: RedisCluster, redis_url: str, prefix: str
) -> None:
    name = f"mux-{uuid.uuid4().hex[:8]}"
    client = webtier.connect_async(redis_url, client_name=name)
    tier = webtier.AsyncWebTier(client, webtier.Config(prefix=prefix))
    try:
        tokens = [await tier.sessions.new() for _ in range(30)]
        for token in tokens:
            await tier.sessions.touch(token, item="item1")
        await tier.counters.record("hits")
        slots = client.slots
        assert slots is not None
        written = set()
        for server in cluster.servers:
            with server.client() as admin:
                ours = [c for c in admin.client_list() if c["name"] == name]
            # A replica may be asked for the slot map (a seed may be one),
            # and for nothing else.
            if any(not c["cmd"].startswith("cluster") for c in ours):
                written.add(f"127.0.0.1:{server.port}")
        assert written, "the client wrote to no node"
        assert written <= slots.masters
    finally:
        await client.aclose()


async def test_commands_that_would_take_the_shared_connection_are_refused(
    server: RedisServer,
) -> None:
    client = webtier.connect_async(server.url)
    try:
        for command in (
            ("BLPOP", "k", 1),
            ("multi",),
            (b"SELECT", 1),
            ("SUBSCRIBE", "c"),
            ("XREAD", "BLOCK", 0, "STREAMS", "s", "$"),
            ("CLIENT", "REPLY", "OFF"),
        ):
            with pytest.raises(webtier.InvalidInput, match="every task shares"):
                await client.execute(*command)
        assert await client.execute("XREAD", "COUNT", 1, "STREAMS", "s", "0") is None
        assert await client.execute("CLIENT", "GETNAME") is None
    finally:
        await client.aclose()


def test_a_client_used_from_one_event_loop_then_another(server: RedisServer) -> None:
    # The second loop gets connections of its own; the first's, its loop
    # not running, are closed without it (for when it runs again).
    client = webtier.connect_async(server.url)
    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        one = first.run_until_complete(client.execute("CLIENT", "ID"))
        two = second.run_until_complete(client.execute("CLIENT", "ID"))
        assert one != two
        first.run_until_complete(asyncio.sleep(0))  # the first's transport finishes closing

        def ids() -> set[str]:
            with server.client() as admin:
                return {c["id"] for c in admin.client_list()}

        wait_for(lambda: str(one) not in ids(), "the first loop's connection closed")
        assert str(two) in ids()
        second.run_until_complete(client.aclose())
    finally:
        first.close()
        second.close()


def test_a_client_serving_a_running_loop_is_refused_to_another(server: RedisServer) -> None:
    import threading

    client = webtier.connect_async(server.url)
    ready, done = threading.Event(), threading.Event()

    async def serve() -> None:
        await client.execute("PING")
        ready.set()
        while not done.is_set():
            await asyncio.sleep(0.01)
        await client.aclose()

    thread = threading.Thread(target=asyncio.run, args=(serve(),))
    thread.start()
    try:
        ready.wait(10)
        with pytest.raises(webtier.ConfigError, match="a client per event loop"):
            asyncio.run(client.execute("PING"))
    finally:
        done.set()
        thread.join(10)


@pytest.mark.onlycluster
async def test_a_slot_being_migrated_is_followed_by_ask(
    cluster: RedisCluster, redis_url: str, prefix: str
) -> None:
    # The slot of a new key is moving from its master to another: its old
    # master answers ASK, and the write goes once to the new one (ASKING).
    client = webtier.connect_async(redis_url)
    key = f"{prefix}:ask"
    slot = slot_of(key)
    try:
        await client.execute("PING", route=key)
        slots = client.slots
        assert slots is not None
        source_name = slots.owners[slot]
        target_name = next(name for name in sorted(slots.masters) if name != source_name)
        admins = {f"127.0.0.1:{s.port}": s.client() for s in cluster.servers}
        source, target = admins[str(source_name)], admins[target_name]
        source_id, target_id = (
            source.execute_command("CLUSTER", "MYID"),
            target.execute_command("CLUSTER", "MYID"),
        )
        target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        try:
            tier = webtier.AsyncWebTier(client, webtier.Config(prefix=prefix))

            def incr() -> Any:
                (reply,) = yield write(key, ("INCR", key), idempotent=False)
                return reply

            assert await tier.transport.run(incr()) == 1
            assert source.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
            assert target.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 1
        finally:
            pipe = target.pipeline(transaction=False)
            pipe.execute_command("ASKING")
            pipe.execute_command("DEL", key)
            pipe.execute()
            for admin in (source, target):
                admin.execute_command("CLUSTER", "SETSLOT", slot, "NODE", source_id)
            for admin in admins.values():
                admin.close()
    finally:
        await client.aclose()
