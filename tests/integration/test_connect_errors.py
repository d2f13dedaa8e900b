"""A wrong URL is one webtier error naming the cause and the fix, from the
sync and the asyncio API alike, and quickly: a database number the server
lacks, a server that is not a cluster, nothing at a cluster URL, TLS on a
plain-TCP server."""

from __future__ import annotations

import time

import pytest

import webtier
from webtier.testing import RedisServer, free_port

pytestmark = pytest.mark.anyio


@pytest.fixture
def plain(servers: dict[str, RedisServer]) -> RedisServer:
    """The suite's plain-TCP, non-cluster server."""
    return servers["standalone"]


async def first_operation(url: str, api: str) -> None:
    """Connect as a web app would and make one call (a cluster's sync
    client connects in connect(), the others on this call)."""
    if api == "sync":
        with webtier.open(url) as tier:
            tier.counters.names()
        return
    async with webtier.open_async(url) as tier:
        await tier.counters.names()


async def raised_within(seconds: float, url: str, api: str) -> tuple[webtier.WebtierError, float]:
    began = time.monotonic()
    with pytest.raises(webtier.WebtierError) as raised:
        await first_operation(url, api)
    took = time.monotonic() - began
    assert took < seconds, f"{type(raised.value).__name__} after {took:.1f} s"
    return raised.value, took


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_database_number_the_server_lacks(plain: RedisServer, api: str) -> None:
    error, _ = await raised_within(2, f"redis://127.0.0.1:{plain.port}/99", api)
    assert isinstance(error, webtier.ConfigError)
    assert str(error).startswith("no such database number on this server: use one below")


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_server_that_is_not_a_cluster(plain: RedisServer, api: str) -> None:
    error, _ = await raised_within(2, f"redis+cluster://127.0.0.1:{plain.port}", api)
    assert isinstance(error, webtier.ConfigError)  # not retried as an outage
    assert str(error).startswith("not a Redis Cluster: use a redis:// URL")


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_cluster_url_with_nothing_there(api: str) -> None:
    error, _ = await raised_within(5, f"redis+cluster://127.0.0.1:{free_port()}", api)
    assert isinstance(error, webtier.RedisUnavailable)
    assert "connecting to 127.0.0.1" in str(error)


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_tls_on_a_plain_server_says_so_within_the_connect_timeout(
    plain: RedisServer, api: str
) -> None:
    url = f"rediss://127.0.0.1:{plain.port}/0?socket_connect_timeout=1"
    error, _ = await raised_within(1 + 0.5, url, api)
    assert isinstance(error, webtier.ConfigError)
    assert str(error).startswith(
        "TLS handshake failed: is the server TLS? (use redis:// for plain TCP)"
    )


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_tls_on_nothing_stays_an_outage(api: str) -> None:
    # The plain-TCP check must not turn a server that is down into a
    # configuration error: that is retried, and reported as unreachable.
    error, _ = await raised_within(5, f"rediss://127.0.0.1:{free_port()}/0", api)
    assert isinstance(error, webtier.RedisUnavailable)
