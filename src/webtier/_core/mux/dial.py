"""Opening one connection: connect (TCP, unix socket or TLS), then greet the
server (HELLO, AUTH, CLIENT SETNAME, SELECT) in one round trip, all within
the connect timeout. Something that answers, but not as Redis, is a
``ConfigError`` at once (see :mod:`webtier._core.not_redis`). A Sentinel's master
must say it is one (its role in the greeting's ``HELLO`` reply), else
:class:`NotMaster`, a failure to connect like any other. A refusal of
the greeting is said as what it means:
wrong credentials are an outage of this client (``AuthenticationError``,
which the wire reports as such), a database the server lacks is a
``ConfigError`` raised at once, as is a ``rediss://`` URL on a plain server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
from redis import exceptions as rx

from webtier._core.mux.link import Limits, Link, outcome_of
from webtier._core.mux.settings import Settings
from webtier._core.not_redis import GREETING_END
from webtier._core.protocol import Command
from webtier._core.redis_errors import as_webtier_error
from webtier._core.sentinel import role_in
from webtier._core.tls_check import NOT_TLS, speaks_plain_redis_async
from webtier.errors import ConfigError

_CONNECT_FAILURES = (OSError, rx.ConnectionError, rx.TimeoutError)


class NotMaster(rx.ConnectionError):
    """The server where a Sentinel's master was looked for is not a master:
    nothing was sent to it."""


# hiredis's stub types the argument as a 1-tuple; it takes any command tuple.
_pack: Any = hiredis.pack_command


def pack(commands: tuple[Command, ...] | list[Command]) -> bytes:
    if len(commands) == 1:
        return _pack(commands[0])  # type: ignore[no-any-return]
    return b"".join(map(_pack, commands))


async def open_link(settings: Settings, loop: asyncio.AbstractEventLoop) -> Link:
    """A connection to the server of ``settings``, greeted and ready.
    Raises redis-py's ``ConnectionError``/``TimeoutError`` (nothing sent),
    ``AuthenticationError``, or ``ConfigError``."""
    limits = Limits(settings.max_in_flight, settings.max_queued_bytes, settings.read_timeout)
    link = Link(loop, limits, settings.name)
    try:
        async with asyncio.timeout(settings.connect_timeout):
            await _connect(link, settings, loop)
            await _greet(link, settings)
    except TimeoutError as error:
        link.close()
        await _not_tls(settings, error)
        late = f"no connection to {settings.name} within the connect timeout"
        raise rx.TimeoutError(late) from None
    except BaseException:
        link.close()
        raise
    return link


async def _not_tls(settings: Settings, error: BaseException) -> None:
    """A TLS connection that failed: to a plain server (it answers a plain
    ``PING``), the URL is wrong, said at once and never retried."""
    if (
        settings.tls is not None
        and settings.path is None
        and await speaks_plain_redis_async(settings.host, settings.port, settings.connect_timeout)
    ):
        raise ConfigError(f"{NOT_TLS} ({settings.name})") from error


async def _connect(link: Link, settings: Settings, loop: asyncio.AbstractEventLoop) -> None:
    try:
        if settings.path is not None:
            await loop.create_unix_connection(lambda: link, settings.path)
        elif settings.tls is None:
            await loop.create_connection(lambda: link, settings.host, settings.port)
        else:
            await loop.create_connection(
                lambda: link,
                settings.host,
                settings.port,
                ssl=settings.tls,
                server_hostname=settings.host if settings.check_hostname else None,
                ssl_handshake_timeout=settings.connect_timeout,
            )
    except OSError as error:  # ssl.SSLError included
        await _not_tls(settings, error)
        raise rx.ConnectionError(f"error connecting to {settings.name}: {error}") from error


async def _greet(link: Link, settings: Settings) -> None:
    greeting = settings.greeting()
    # The empty line after the greeting makes an HTTP server answer at once
    # (see webtier._core.not_redis); Redis skips it.
    outcome = outcome_of(await link.send(pack(greeting) + GREETING_END, len(greeting)).future)
    if outcome.error is not None:
        raise outcome.error
    for reply in outcome.replies:
        if isinstance(reply, rx.AuthenticationError | rx.AuthorizationError):
            raise reply
        if isinstance(reply, rx.NoPermissionError):
            raise rx.AuthorizationError(f"{settings.name}: {reply}")
        if isinstance(reply, rx.BusyLoadingError):
            # A server loading its data (just restarted) will answer soon:
            # an outage, retried like a refused connection.
            raise reply
        if isinstance(reply, BaseException):
            # A database the server lacks, a HELLO the server does not know
            # (RESP3 asked of Redis 5): the URL is wrong, retrying won't help.
            meaning = as_webtier_error(reply)
            if not isinstance(meaning, ConfigError):
                meaning = ConfigError(f"{settings.name} refused the connection's greeting: {reply}")
            raise meaning from reply
    if settings.master_only:
        # HELLO is the greeting's first command on RESP3, its last on RESP2.
        check_master(outcome.replies[0 if settings.protocol == 3 else -1], settings.name)


def check_master(hello: Any, name: str) -> None:
    """Raise :class:`NotMaster` unless ``hello`` (a ``HELLO`` reply) says ``role: master``."""
    role = role_in(hello)
    if role != "master":
        raise NotMaster(f"{name} is not a master (its role: {role})")
