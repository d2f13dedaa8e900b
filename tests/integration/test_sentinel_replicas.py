"""Replica reads on Sentinel (``?replica_reads=yes``): the reads issued
inside :func:`webtier.replica_reads` go to a replica, every other request
to the master; a write never goes to a replica; with no replica answering,
the reads go to the master. Where a command ran is read from each server's
``INFO commandstats``: a distinct read command (STRLEN, which nothing else
of the deployment sends) is counted on the server that served it."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Any

import httpx
import pytest

import webtier
from tests.helpers.cli import webtier_cli
from webtier._core.protocol import Request, read
from webtier.testing import RedisSentinel
from webtier.web.dashboard import api, dashboard

pytestmark = pytest.mark.anyio
APIS = pytest.mark.parametrize("api", ["sync", "async"])


def opted_in(deployment: RedisSentinel) -> str:
    return f"{deployment.url}?replica_reads=yes"


def counted(deployment: RedisSentinel, field: str = "calls") -> dict[int, dict[str, int]]:
    """Per server (its port): each command's ``field`` in INFO commandstats."""
    found = {}
    for server in deployment.servers:
        with contextlib.closing(deployment.server_client(server, socket_timeout=5)) as client:
            stats = client.info("commandstats")
        found[server.port] = {name[8:]: int(each[field]) for name, each in stats.items()}
    return found


def grown(
    before: dict[int, dict[str, int]], after: dict[int, dict[str, int]], name: str
) -> dict[int, int]:
    """The servers on which ``name``'s count grew, and by how much."""
    return {
        port: after[port].get(name, 0) - before[port].get(name, 0)
        for port in after
        if after[port].get(name, 0) != before[port].get(name, 0)
    }


def lengths(key: str, times: int) -> Generator[Request, Any, list[int]]:
    """``times`` reads (STRLEN) of ``key``, one request each."""
    found = []
    for _ in range(times):
        replies = yield read(key, ("STRLEN", key))
        found.append(int(replies[0]))
    return found


def set_value(key: str) -> Generator[Request, Any, None]:
    yield Request(key, (("SET", key, "value"),), idempotent=True, writes=True)


async def run(url: str, api: str, op: Any, *, tolerated: bool) -> Any:
    """``op`` run once on a tier on ``url``, inside replica_reads() or not."""
    context = webtier.replica_reads() if tolerated else contextlib.nullcontext()
    if api == "sync":
        with webtier.open(url) as tier, context:
            return tier.transport.run(op)
    async with webtier.open_async(url) as atier:
        with context:
            return await atier.transport.run(op)


@APIS
async def test_the_reads_inside_replica_reads_go_to_a_replica(
    sentinel: RedisSentinel, api: str, prefix: str
) -> None:
    master = sentinel.current_master().port
    before = counted(sentinel)
    assert await run(opted_in(sentinel), api, lengths(f"{prefix}:k", 5), tolerated=True) == [0] * 5
    served = grown(before, counted(sentinel), "strlen")
    assert master not in served
    assert sum(served.values()) == 5


@APIS
@pytest.mark.parametrize("case", ["outside the block", "not opted in"])
async def test_the_other_reads_go_to_the_master(
    sentinel: RedisSentinel, api: str, case: str, prefix: str
) -> None:
    url, tolerated = (
        (opted_in(sentinel), False) if case == "outside the block" else (sentinel.url, True)
    )
    before = counted(sentinel)
    await run(url, api, lengths(f"{prefix}:k", 5), tolerated=tolerated)
    assert grown(before, counted(sentinel), "strlen") == {sentinel.current_master().port: 5}


@APIS
async def test_a_write_inside_replica_reads_goes_to_the_master(
    sentinel: RedisSentinel, api: str, prefix: str
) -> None:
    """Sent to a replica, the write would be refused there (READONLY, a
    rejected call), then sent to the master: so no call may be rejected."""
    master = sentinel.current_master()
    before = counted(sentinel, "rejected_calls")
    await run(opted_in(sentinel), api, set_value(f"{prefix}:w"), tolerated=True)
    assert grown(before, counted(sentinel, "rejected_calls"), "set") == {}
    with contextlib.closing(sentinel.server_client(master, socket_timeout=5)) as client:
        assert client.get(f"{prefix}:w") == b"value"


# What the deployment itself sends its servers (sentinels, replication), and
# a new client's greeting: none of it a command the CLI reads with.
_NOT_THE_CLIS = frozenset(
    [
        "ping",
        "info",
        "hello",
        "publish",
        "subscribe",
        "replconf",
        "psync",
        "sync",
        "client",
        "select",
        "role",
        "config",
        "command",
        "multi",
        "exec",
        "slaveof",
        "replicaof",
    ]
)


@pytest.mark.parametrize(
    "command",
    [
        ("ranking", "top"),
        ("stats", "slowest"),
        ("sessions", "stats"),
        ("counters", "list"),
    ],
    ids=" ".join,
)
def test_the_read_only_cli_commands_read_a_replica(
    sentinel: RedisSentinel, prefix: str, command: tuple[str, ...]
) -> None:
    master = sentinel.current_master().port
    before = counted(sentinel)
    ran = webtier_cli("--url", opted_in(sentinel), "--prefix", prefix, *command)
    assert ran.code == 0, ran.stderr
    assert_read_on_replicas_only(sentinel, master, before)


def assert_read_on_replicas_only(
    deployment: RedisSentinel, master: int, before: dict[int, dict[str, int]]
) -> None:
    """Since ``before``, the master ran none of the client's commands, and a replica some."""
    after = counted(deployment)

    def sent_to(port: int) -> set[str]:
        return {
            n for n in after[port] if n not in _NOT_THE_CLIS and grown(before, after, n).get(port)
        }

    assert sent_to(master) == set()
    assert set().union(*(sent_to(port) for port in after if port != master))


async def test_the_dashboards_api_reads_a_replica(sentinel: RedisSentinel, prefix: str) -> None:
    master = sentinel.current_master().port
    config = webtier.Config(prefix=prefix)
    async with webtier.open_async(opted_in(sentinel), config=config) as atier:
        before = counted(sentinel)
        app = httpx.ASGITransport(app=dashboard(atier))
        async with httpx.AsyncClient(transport=app, base_url="http://localhost") as client:
            for path in ("/api/counters", "/api/stats", "/api/health"):
                answer = await client.get(path)
                assert answer.status_code == 200, answer.text
    assert_read_on_replicas_only(sentinel, master, before)


async def test_a_dashboard_endpoint_that_does_not_tolerate_lag_reads_the_master(
    sentinel: RedisSentinel, prefix: str
) -> None:
    """The actions' endpoints (a purge reads what it then deletes)."""

    async def handler(atier: webtier.AsyncWebTier, request: Any) -> Any:
        return await atier.transport.run(lengths(f"{prefix}:k", 2))

    before = counted(sentinel)
    async with webtier.open_async(opted_in(sentinel)) as atier:
        answer = await api.endpoint(handler, atier, lag_tolerated=False)(None)  # type: ignore[arg-type]
    assert answer.status_code == 200
    assert grown(before, counted(sentinel), "strlen") == {sentinel.current_master().port: 2}


@pytest.mark.slow  # kills the replicas, then waits until they are back
@APIS
async def test_with_no_replica_up_the_reads_go_to_the_master(
    sentinel: RedisSentinel, api: str, prefix: str
) -> None:
    master = sentinel.current_master()
    replicas = [s for s in sentinel.servers if s is not master]
    url = opted_in(sentinel)

    def lengths_around_a_kill() -> Generator[Request, Any, list[int]]:
        found = yield from lengths(f"{prefix}:k", 2)  # the replica connections open
        for replica in replicas:
            replica.kill()
        return found + (yield from lengths(f"{prefix}:k", 3))

    try:
        before = counted_on(sentinel, master)
        assert await run(url, api, lengths_around_a_kill(), tolerated=True) == [0] * 5
        assert counted_on(sentinel, master) - before == 3
    finally:
        for replica in replicas:
            replica.launch()
        sentinel.wait_healthy()


def counted_on(deployment: RedisSentinel, server: Any) -> int:
    with contextlib.closing(deployment.server_client(server, socket_timeout=5)) as client:
        return int(client.info("commandstats").get("cmdstat_strlen", {}).get("calls", 0))


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://127.0.0.1:1/mymaster/0?replica_reads=maybe",
        "redis://127.0.0.1:1/0?replica_reads=yes",
    ],
)
def test_a_replica_reads_option_that_cannot_be_followed(url: str) -> None:
    with pytest.raises(webtier.ConfigError, match="replica_reads"):
        webtier.connect(url)
