"""The executors throw every failure of a step into the operation, at its
``yield``: an op may handle it, one that does not raises it unchanged. No
server: the client points at a port nothing listens on."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from webtier._core.drive import AsyncTransport, SyncTransport
from webtier._core.protocol import Op, read
from webtier.config import RetryPolicy
from webtier.errors import RedisUnavailable


@pytest.fixture
def closed_port() -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield probe.getsockname()[1]  # bound, never listening: connections are refused


def ping() -> Op[str]:
    try:
        yield read("k", ("GET", "k"))
    except RedisUnavailable as error:
        return f"caught: {type(error).__name__}"
    return "answered"


def ping_uncaught() -> Op[Any]:
    return (yield read("k", ("GET", "k")))


POLICY = RetryPolicy(attempts=0)


def test_the_sync_executor_throws_an_unreachable_server_into_the_op(closed_port: int) -> None:
    client = redis.Redis(port=closed_port, socket_connect_timeout=0.5)
    transport = SyncTransport(client, POLICY)
    assert transport.run(ping()) == "caught: RedisUnavailable"
    with pytest.raises(RedisUnavailable):
        transport.run(ping_uncaught())
    client.close()


@pytest.mark.anyio
async def test_the_asyncio_executor_throws_an_unreachable_server_into_the_op(
    closed_port: int,
) -> None:
    client = redis.asyncio.Redis(port=closed_port, socket_connect_timeout=0.5)
    transport = AsyncTransport(client, POLICY)
    assert await transport.run(ping()) == "caught: RedisUnavailable"
    with pytest.raises(RedisUnavailable):
        await transport.run(ping_uncaught())
    await client.aclose()
