"""A ``rediss://`` URL on a server that speaks plain TCP, said as such.

Without this, the TLS handshake with a plain Redis server waits for an
answer that never comes (the server reads the ClientHello as the start of
an inline command): redis-py's sync client waits its socket timeout, webtier
retries, and the caller reads "Timeout connecting to server" 20 s later.

Mixed into redis-py's TLS connection classes by :mod:`webtier.connect`: the
handshake gets the connect timeout, and when connecting fails, one plain
``PING`` on a new socket tells a plain server (it answers in RESP) from a
TLS server that is slow or down (it does not); only the first is a
:class:`~webtier.errors.ConfigError`, raised at once and never retried.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from redis import exceptions as rx

from webtier.errors import ConfigError

NOT_TLS = "TLS handshake failed: is the server TLS? (use redis:// for plain TCP)"
_RESP_FIRST_BYTES = (b"+", b"-")  # +PONG, or -NOAUTH / -ERR: plain Redis either way
_CONNECT_FAILURES = (rx.ConnectionError, rx.TimeoutError, OSError)


def speaks_plain_redis(host: str, port: int, timeout: float | None) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout or 1.0) as probe:
            probe.sendall(b"PING\r\n")
            return probe.recv(1) in _RESP_FIRST_BYTES
    except OSError:
        return False


async def speaks_plain_redis_async(host: str, port: int, timeout: float | None) -> bool:
    try:
        async with asyncio.timeout(timeout or 1.0):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(b"PING\r\n")
                return await reader.read(1) in _RESP_FIRST_BYTES
            finally:
                writer.close()
    except (OSError, TimeoutError):
        return False


class TlsChecked:
    """For redis-py's sync ``SSLConnection``."""

    host: str
    port: int
    socket_connect_timeout: float | None
    socket_timeout: float | None

    def _wrap_socket_with_ssl(self, sock: socket.socket) -> Any:
        # The handshake is part of connecting: it gets the connect timeout,
        # not the (longer) timeout of a command's reply.
        sock.settimeout(self.socket_connect_timeout)
        wrapped = super()._wrap_socket_with_ssl(sock)  # type: ignore[misc]
        wrapped.settimeout(self.socket_timeout)
        return wrapped

    def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().connect_check_health(*args, **kwargs)  # type: ignore[misc]
        except _CONNECT_FAILURES as error:
            if speaks_plain_redis(self.host, self.port, self.socket_connect_timeout):
                raise ConfigError(f"{NOT_TLS} ({self.host}:{self.port})") from error
            raise


class AsyncTlsChecked:
    """For redis-py's asyncio ``SSLConnection`` (whose handshake already
    runs within the connect timeout)."""

    host: str
    port: int
    socket_connect_timeout: float | None

    async def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().connect_check_health(*args, **kwargs)  # type: ignore[misc]
        except _CONNECT_FAILURES as error:
            if await speaks_plain_redis_async(self.host, self.port, self.socket_connect_timeout):
                raise ConfigError(f"{NOT_TLS} ({self.host}:{self.port})") from error
            raise
