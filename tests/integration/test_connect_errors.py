"""A wrong URL is one webtier error naming the cause and the fix, from the
sync and the asyncio API alike, and quickly: a database number the server
lacks, a server that is not a cluster, nothing at a cluster URL, TLS on a
plain-TCP server, an HTTP server where Redis was expected."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import webtier
from tests.helpers.web import uvicorn_serving
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


async def _lifespan_only(scope: Any, receive: Any, send: Any) -> None:
    # The app starts and stops; no HTTP request ever reaches it.
    assert scope["type"] == "lifespan"
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})


@contextlib.contextmanager
def http_server(kind: str) -> Iterator[int]:
    """A real HTTP server on a free loopback port: uvicorn with h11 (which
    waits for the end of a request's headers, as most servers do), or the
    standard library's (which answers the first line at once)."""
    if kind == "h11":
        with uvicorn_serving(_lifespan_only, http="h11") as url:
            yield int(url.rsplit(":", 1)[1])
        return
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("kind", ["h11", "stdlib"])
@pytest.mark.parametrize("api", ["sync", "async"])
async def test_an_http_server_is_said_at_once(kind: str, api: str) -> None:
    # Timeouts of 30 s: waiting for one (as before, 4 tries of it) would
    # take 30 s at least, against the few milliseconds of an answer.
    with http_server(kind) as port:
        url = f"redis://127.0.0.1:{port}/0?socket_connect_timeout=30&socket_timeout=30"
        error, _ = await raised_within(10, url, api)
    assert isinstance(error, webtier.ConfigError)  # never retried
    assert str(error) == f"127.0.0.1:{port} answered, but not as Redis (it looks like HTTP)"
