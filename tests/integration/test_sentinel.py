"""Redis Sentinel (``redis+sentinel://``): the master found through the
sentinels, sync and asyncio, with the servers' and the sentinels' passwords;
a replica that answers ``READONLY`` left for the master the sentinels name;
no sentinel, or no such service, said in one line. The capabilities
themselves run on the ``sentinel`` target with the other matrix tests;
failovers are in tests/faults/test_sentinel_faults.py."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.asyncio.sentinel import SentinelConnectionPool as AsyncSentinelConnectionPool
from redis.sentinel import SentinelConnectionPool

import webtier
from tests.faults.servers import make_certificate, start_server, stopped
from tests.helpers.cli import webtier_cli
from tests.helpers.servers import BINARIES
from webtier._core.mux import MuxClient
from webtier._core.mux.dial import open_link
from webtier._core.mux.link import Link
from webtier._core.mux.sentinel import ANNOUNCEMENTS, MasterFinder, MasterNode
from webtier._core.mux.settings import Settings, settings_from
from webtier._core.sentinel import SentinelTarget
from webtier.testing import RedisSentinel, RedisServer, StaleSentinel, free_port

pytestmark = pytest.mark.anyio
# "redis-py-async": connect_async(url, client="redis-py"), redis-py's asyncio Sentinel.
APIS = pytest.mark.parametrize("api", ["sync", "async", "redis-py-async"])


async def recorded(url: str, api: str, config: webtier.Config, times: int = 3) -> int:
    """Record a counter ``times`` through a tier on ``url``; its total."""
    if api == "sync":
        with webtier.open(url, config=config) as tier:
            for _ in range(times):
                tier.counters.record("hits")
            return sum(count for _, count in tier.counters.get("hits", 86400))
    if api == "redis-py-async":
        client = webtier.connect_async(url, client="redis-py")
        try:
            atier = webtier.AsyncWebTier(client, config)
            for _ in range(times):
                await atier.counters.record("hits")
            return sum(count for _, count in await atier.counters.get("hits", 86400))
        finally:
            await client.aclose()
    async with webtier.open_async(url, config=config) as atier:
        for _ in range(times):
            await atier.counters.record("hits")
        return sum(count for _, count in await atier.counters.get("hits", 86400))


def keys_on(deployment: RedisSentinel, server: RedisServer, prefix: str) -> list[bytes]:
    with contextlib.closing(deployment.server_client(server, socket_timeout=5)) as client:
        return list(client.scan_iter(match=f"{prefix}:*"))


@APIS
async def test_the_tier_writes_to_the_master_the_sentinels_name(
    sentinel: RedisSentinel, api: str, config: webtier.Config
) -> None:
    assert await recorded(sentinel.url, api, config) == 3
    master = sentinel.current_master()
    assert keys_on(sentinel, master, config.prefix)


@pytest.fixture(scope="module")
def guarded() -> Iterator[RedisSentinel]:
    """A master and a sentinel, each with a password of its own."""
    with RedisSentinel.start(
        BINARIES["standalone"], replicas=0, sentinels=1, password="s3rv", sentinel_password="s3nt"
    ) as running:
        yield running


@pytest.mark.slow  # a deployment of its own
@APIS
async def test_the_servers_and_the_sentinels_passwords(
    guarded: RedisSentinel, api: str, config: webtier.Config
) -> None:
    assert await recorded(guarded.url, api, config) == 3
    wrong = guarded.url.replace("sentinel_password=s3nt", "sentinel_password=nope")
    with pytest.raises(webtier.RedisUnavailable, match="no sentinel gave the master"):
        await recorded(wrong, api, config)
    wrong = guarded.url.replace(":s3rv@", ":nope@")
    with pytest.raises(webtier.RedisUnavailable, match=r"credentials|WRONGPASS|invalid"):
        await recorded(wrong, api, config)


@APIS
async def test_no_sentinel_answering_is_one_clear_line(api: str, config: webtier.Config) -> None:
    ports = [free_port(), free_port()]
    url = f"redis+sentinel://127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}/mymaster/0"
    with pytest.raises(webtier.RedisUnavailable) as raised:
        await recorded(url, api, config)
    message = str(raised.value)
    assert "no sentinel gave the master of 'mymaster'" in message
    assert all(f"127.0.0.1:{port}" in message for port in ports)
    assert "\n" not in message


@APIS
async def test_a_service_the_sentinels_do_not_watch(
    sentinel: RedisSentinel, api: str, config: webtier.Config
) -> None:
    url = sentinel.url.replace(f"/{sentinel.service}/", "/nosuchservice/")
    with pytest.raises(webtier.RedisUnavailable, match="no master named 'nosuchservice'"):
        await recorded(url, api, config)


@pytest.fixture
def stale(sentinel: RedisSentinel) -> Iterator[StaleSentinel]:
    """A sentinel naming a replica as the master, first in :attr:`StaleSentinel.url`."""
    with StaleSentinel.start(sentinel, BINARIES["standalone"]) as running:
        yield running


def readonly_refusals(server: RedisServer) -> int:
    """The ``READONLY`` refusals ``server`` answered since it started."""
    with contextlib.closing(server.client(socket_timeout=5)) as client:
        return int(client.info("errorstats").get("errorstat_READONLY", {}).get("count", 0))


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_sentinel_naming_a_replica_is_passed_over(
    sentinel: RedisSentinel, stale: StaleSentinel, api: str, config: webtier.Config
) -> None:
    # The first sentinel of the URL names a replica as the master, as one
    # that has not yet heard of a failover names the old master: the
    # replica says what it is in the connection's greeting, before any
    # command, and the next sentinel's answer is taken. Every write lands
    # on the master, and none was ever sent to the replica.
    assert stale.names() == ("127.0.0.1", stale.replica.port)
    assert await recorded(stale.url, api, config) == 3
    assert keys_on(sentinel, sentinel.current_master(), config.prefix)
    assert readonly_refusals(stale.replica) == 0


class Pointing:
    """Where the master is, as a sentinel that is behind would say: the
    addresses given in turn, the last one from then on."""

    service = "mymaster"

    def __init__(self, *addresses: tuple[str, int]) -> None:
        self.addresses = list(addresses)
        self.answers = len(addresses)
        self.asked = 0

    def next(self) -> tuple[str, int]:
        self.asked += 1
        return self.addresses.pop(0) if len(self.addresses) > 1 else self.addresses[0]

    async def masters(
        self, loop: asyncio.AbstractEventLoop, failures: list[str]
    ) -> AsyncIterator[tuple[tuple[str, int], tuple[str, int]]]:
        for _ in range(self.answers):  # as many sentinels as addresses, each naming one
            yield ("127.0.0.1", 0), self.next()

    def trust(self, sentinel: tuple[str, int]) -> None:
        pass

    def none_gave(self, what: str, failures: list[str]) -> str:
        return f"no sentinel gave the {what}: {failures}"

    async def listen(self, heard: object) -> None:
        await asyncio.Event().wait()  # announces nothing: READONLY must move the client

    def discover_master(self, service: str) -> tuple[str, int]:
        return self.next()

    async def adiscover_master(self, service: str) -> tuple[str, int]:
        return self.next()

    def close(self) -> None:
        pass


def replica_and_master(deployment: RedisSentinel) -> tuple[tuple[str, int], tuple[str, int]]:
    master = deployment.current_master()
    replica = next(s for s in deployment.servers if s is not master)
    return ("127.0.0.1", replica.port), ("127.0.0.1", master.port)


async def test_a_replica_answering_readonly_is_left_for_the_master_async(
    sentinel: RedisSentinel, config: webtier.Config
) -> None:
    # The first answer names a replica (a sentinel behind a failover): the
    # replica says so in the connection's greeting, the next answer is
    # taken, and the write is applied once, on the master.
    pointing = Pointing(*replica_and_master(sentinel))
    client = MuxClient(settings_from("redis://127.0.0.1:1/0", {}))
    client.server = MasterNode(client.settings, pointing)  # type: ignore[arg-type]
    assert await recorded_once(client, config) == 1
    assert pointing.asked == 2


async def recorded_once(client: Any, config: webtier.Config) -> int:
    """One counter recorded through an asyncio tier on ``client`` (closed
    after); the total."""
    tier = webtier.AsyncWebTier(client, config)
    try:
        await tier.counters.record("hits")
        return sum(count for _, count in await tier.counters.get("hits", 86400))
    finally:
        await client.aclose()


def test_a_replica_answering_readonly_is_left_for_the_master_sync(
    sentinel: RedisSentinel, config: webtier.Config
) -> None:
    pointing = Pointing(*replica_and_master(sentinel))
    pool = SentinelConnectionPool("mymaster", pointing)  # type: ignore[no-untyped-call]
    client = redis.Redis.from_pool(pool)
    tier = webtier.WebTier(client, config)
    try:
        tier.counters.record("hits")
        assert sum(count for _, count in tier.counters.get("hits", 86400)) == 1
    finally:
        client.close()
    assert pointing.asked >= 2


async def test_a_replica_answering_readonly_is_left_for_the_master_redis_py_async(
    sentinel: RedisSentinel, config: webtier.Config
) -> None:
    # connect_async(url, client="redis-py"): redis-py's asyncio Sentinel pool.
    pointing = Pointing(*replica_and_master(sentinel))
    manager: Any = pointing
    manager.discover_master = pointing.adiscover_master
    pool = AsyncSentinelConnectionPool("mymaster", manager)  # type: ignore[no-untyped-call]
    assert await recorded_once(redis.asyncio.Redis.from_pool(pool), config) == 1
    assert pointing.asked >= 2


class Opened:
    """The connections a node opens; the opens of its dial or of its
    locating held on demand (see :meth:`held_at`), to order them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.links: list[Link] = []
        self.holding = {"dial": asyncio.Event(), "locating": asyncio.Event()}
        self.held = {"dial": asyncio.Event(), "locating": asyncio.Event()}
        for which, module in (("dial", "node"), ("locating", "sentinel")):
            self.release(which)
            monkeypatch.setattr(f"webtier._core.mux.{module}.open_link", self._opener(which))

    def _opener(self, which: str) -> Any:
        async def opened(settings: Settings, loop: asyncio.AbstractEventLoop) -> Link:
            self.held[which].set()
            await self.holding[which].wait()
            link = await open_link(settings, loop)
            self.links.append(link)
            return link

        return opened

    async def held_at(self, which: str, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """``work`` as a task, once it waits to open a connection of ``which``."""
        self.holding[which].clear()
        self.held[which].clear()
        task = asyncio.get_running_loop().create_task(work)
        await self.held[which].wait()
        return task

    def release(self, which: str) -> None:
        self.holding[which].set()

    def left_open(self) -> list[str]:
        return [link.name for link in self.links if link.closed is None]


def master_node(sentinel: RedisSentinel) -> MasterNode:
    """webtier's node of the deployment's master, named by every answer
    (and no sentinel listened to: nothing happens but what the test does)."""
    _, master = replica_and_master(sentinel)
    node = MasterNode(settings_from("redis://127.0.0.1:1/0", {}), Pointing(master))
    node.listening = False
    return node


async def test_a_connection_opened_by_a_locating_while_a_dial_opened_one_is_closed(
    sentinel: RedisSentinel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In a failover, a task finding no connection dials the master just
    # located (announced, or found by another task) while the wire, after
    # another task's broken send, asks the sentinels again and proves their
    # answer on a connection of its own, kept in the free place. The dial's
    # connection, opened meanwhile, took that place over the kept one, left
    # open until collected after its event loop ended (an unclosed transport
    # and its socket, as the Sentinel fault tests once saw). The kept one
    # serves; the dial's is closed.
    opened = Opened(monkeypatch)
    loop = asyncio.get_running_loop()
    node = master_node(sentinel)
    await node.relocate(loop)  # located: the next dial goes there without asking
    first = node.links[0]
    assert first is not None
    first.abort(redis.ConnectionError("closed by the failover"))
    dial = await opened.held_at("dial", node.link(loop))
    await node.relocate(loop)  # the wire's, for another task: its connection kept
    kept = node.links[0]
    opened.release("dial")
    assert await dial is kept
    node.close()
    assert opened.left_open() == []
    assert len(opened.links) == 3


async def test_a_locating_under_way_when_the_client_closes_keeps_nothing_open(
    sentinel: RedisSentinel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client closed while the sentinels' answer was being proved (a
    # connection to the master it names being opened): that connection
    # was kept after the close, and left open when the event loop ended.
    opened = Opened(monkeypatch)
    loop = asyncio.get_running_loop()
    node = master_node(sentinel)
    locating = await opened.held_at("locating", node.relocate(loop))
    node.close()
    opened.release("locating")
    # Its caller was not cancelled: it learns the client closed.
    with pytest.raises(redis.exceptions.ConnectionError, match="the client was closed"):
        await locating
    assert opened.left_open() == []
    assert node.links == [None]


def test_the_listeners_tls_connection_is_left_closed_with_the_loop(tmp_path: Path) -> None:
    # The asyncio client keeps a sentinel subscribed to the announcements
    # (here a TLS server of its own: SUBSCRIBE is all the listener sends).
    # Closed, it closed that connection as TLS would, sending close_notify
    # and waiting for the peer's; a sentinel slow to answer (here stopped)
    # outlived the event loop, and the socket under the TLS was left open,
    # to be collected unclosed: a transport and its socket, the two warnings
    # the Sentinel fault tests once failed on.
    certificate = make_certificate(tmp_path)
    with start_server(tls=certificate) as server, contextlib.ExitStack() as resumed:
        target = SentinelTarget((("127.0.0.1", server.port),), "mymaster", server.url, None, None)
        finder = MasterFinder(target, settings_from(server.url, {}))
        watcher = server.client()

        def subscribed() -> bool:
            return any(int(c.get("sub", 0)) == len(ANNOUNCEMENTS) for c in watcher.client_list())

        async def scenario() -> None:
            listening = asyncio.get_running_loop().create_task(finder.listen(lambda _: None))
            while not subscribed():
                await asyncio.sleep(0.01)
            resumed.enter_context(stopped(server))
            listening.cancel()  # as the client's aclose() does
            with contextlib.suppress(asyncio.CancelledError):
                await listening

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            asyncio.run(scenario())
            gc.collect()
        watcher.close()
    assert [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)] == []


def test_the_command_line_on_sentinel(
    sentinel: RedisSentinel, prefix: str, monkeypatch: Any
) -> None:
    with webtier.open(sentinel.url, config=webtier.Config(prefix=prefix)) as tier:
        tier.counters.record("hits:/")
    ran = webtier_cli("--url", sentinel.url, "--prefix", prefix, "counters", "list")
    assert ran.code == 0, ran.stderr
    assert "hits:/" in ran.stdout
    monkeypatch.setenv("WEBTIER_REDIS_URL", sentinel.url)
    ran = webtier_cli("--prefix", prefix, "counters", "list")
    assert ran.code == 0, ran.stderr
    assert "hits:/" in ran.stdout
