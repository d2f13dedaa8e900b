"""Redis Sentinel: the ``redis+sentinel://`` URL, and the sync client on it.

``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db][?query]``
names the sentinels and the service they watch; the credentials are the
data servers' (the master's and its replicas'), ``sentinel_username`` and
``sentinel_password`` in the query the sentinels' own, when they have any;
``rediss+sentinel://`` speaks TLS to both (the ``ssl_*`` options apply to
both). The other query parameters are redis-py's, for the master's
connections.

The sync client is redis-py's (``Sentinel.master_for``): each new connection
asks the sentinels where the master is, and goes on to the next sentinel's
answer when the server named says it is not a master (a sentinel that has
not yet heard of a failover names the old master). The executor makes it follow a
failover (:func:`follow_master`): a ``READONLY`` reply or a broken send makes
the wire refresh, which asks the sentinels again and closes the idle
connections to a master that is no longer one. The asyncio side is
:mod:`webtier._core.mux.sentinel`, or with ``client="redis-py"`` redis-py's
asyncio ``Sentinel``, followed the same way (:func:`afollow_master`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import SplitResult, parse_qsl, quote, urlencode, urlsplit

import redis
import redis.asyncio
from redis import exceptions as rx
from redis.asyncio.retry import Retry as AsyncRetry
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.asyncio.sentinel import SentinelConnectionPool as AsyncSentinelConnectionPool
from redis.backoff import NoBackoff
from redis.connection import SSLConnection, parse_url
from redis.retry import Retry
from redis.sentinel import (
    MasterNotFoundError,
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
)

from webtier._core.replicas import opted_in
from webtier.errors import ConfigError

_SENTINEL_OWN = ("sentinel_username", "sentinel_password")
REPLICA_READS = "replica_reads"  # webtier's own: see webtier._core.replicas
# What the connections to the sentinels take from the master's options.
_SHARED_PREFIXES = ("socket_connect_timeout", "socket_timeout", "ssl_")


@dataclass(frozen=True, slots=True)
class SentinelTarget:
    """A parsed ``redis+sentinel://`` URL."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    server_url: str  # a redis:// URL for the master, its host still unknown
    username: str | None  # the sentinels' credentials
    password: str | None
    replica_reads: bool = False  # the reads that tolerate lag go to a replica


def split_hosts(
    url: str, base: str, what: str
) -> tuple[SplitResult, str, tuple[tuple[str, int], ...]]:
    """A URL naming several hosts (a cluster's seeds, the sentinels): its
    parts as ``base://``, its credentials, and each ``host:port``."""
    parts = urlsplit(f"{base}://{url.split('://', 1)[1]}")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    found = []
    for hostport in hosts.split(","):
        host, sep, port = hostport.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"{what} must be host:port, got {hostport!r} in {url!r}")
        found.append((host.strip("[]"), int(port)))
    return parts, userinfo, tuple(found)


def parse_sentinel(url: str, base: str) -> SentinelTarget:
    """Split a ``redis+sentinel://`` (``base`` "redis") or
    ``rediss+sentinel://`` (``base`` "rediss") URL."""
    parts, userinfo, sentinels = split_hosts(url, base, "sentinels")
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ConfigError(
            f"a Sentinel URL names the service, then the database: "
            f"redis+sentinel://host:26379,host:26380/mymaster/0, got {url!r}"
        )
    service, db = path[0], path[1] if len(path) == 2 else "0"
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {k: v for k, v in query if k in _SENTINEL_OWN}
    replicas = [opted_in(v, url) for k, v in query if k == REPLICA_READS]
    rest = urlencode([(k, v) for k, v in query if k not in (*_SENTINEL_OWN, REPLICA_READS)])
    auth = f"{userinfo}@" if userinfo else ""
    # The master's address comes from the sentinels; the first one's stands in.
    first = f"{quote(sentinels[0][0])}:{sentinels[0][1]}"
    server_url = f"{base}://{auth}{first}/{db}" + (f"?{rest}" if rest else "")
    return SentinelTarget(
        sentinels,
        service,
        server_url,
        own.get("sentinel_username") or None,
        own.get("sentinel_password"),
        replicas[-1] if replicas else False,
    )


def sentinel_options(options: dict[str, Any]) -> dict[str, Any]:
    """Of the master's connection options, those the sentinels' take too."""
    return {k: v for k, v in options.items() if k.startswith(_SHARED_PREFIXES)}


def _client_options(
    target: SentinelTarget, options: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """The master's connection options, the sentinels', and whether TLS."""
    try:
        kwargs: dict[str, Any] = {**parse_url(target.server_url), **options}  # type: ignore[no-untyped-call]
    except ValueError as error:
        raise ConfigError(f"bad Sentinel URL: {error}") from error
    for where in ("host", "port", "path"):
        kwargs.pop(where, None)
    tls = kwargs.pop("connection_class", None) is redis.SSLConnection or kwargs.pop("ssl", False)
    asked = {**sentinel_options(kwargs), "username": target.username, "password": target.password}
    if tls:
        asked["ssl"] = True
    return kwargs, asked, bool(tls)


def connect_sentinel(target: SentinelTarget, options: dict[str, Any]) -> redis.Redis:
    """A sync redis-py client of the master of ``target``'s service."""
    kwargs, asked, tls = _client_options(target, options)
    # A sentinel that is down is skipped for the next, not retried.
    asked["retry"] = Retry(NoBackoff(), 0)
    sentinel = _Sentinels(list(target.sentinels), sentinel_kwargs=asked)
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        target.service,
        redis_class=redis.Redis,
        connection_pool_class=_MasterPool,
        ssl=tls,
        **kwargs,
    )
    if target.replica_reads:
        replicas = sentinel.slave_for(  # type: ignore[no-untyped-call]
            target.service, redis_class=redis.Redis, ssl=tls, **kwargs
        )
        cast(_MasterPool, client.connection_pool).replicas = replicas.connection_pool
    return client


class _MasterConnection(SentinelManagedConnection):
    """A connection to the master the sentinels name, once the server says
    it is one (its ``role`` in a ``HELLO`` reply, sent after the greeting:
    ``ROLE`` would need ``@admin``): as redis.io's guidelines for Sentinel
    clients ask. A server that is not a master, or not reached, is passed
    over for the next sentinel's answer (the sentinel that named it is
    asked last from then on); none left, the last failure is raised."""

    def _connect_retry(self) -> None:
        connection: Any = self  # redis-py's Connection is untyped
        if connection._sock:
            return
        pool: Any = self.connection_pool
        manager: _Sentinels = pool.sentinel_manager
        failure: BaseException = MasterNotFoundError(f"no master of {pool.service_name!r}")
        for _ in range(len(manager.sentinels)):  # as many tries as sentinels
            address = pool.get_master_address()  # MasterNotFoundError: raised as it is
            try:
                connection.connect_to(address)
                connection.send_command("HELLO", int(self.protocol or 2))
                role = role_in(self.read_response())
            except (rx.AuthenticationError, rx.AuthorizationError):
                raise
            except (rx.ConnectionError, rx.TimeoutError) as error:
                failure = error
            else:
                if role == "master":
                    return
                failure = rx.ConnectionError(
                    f"{address[0]}:{address[1]} is not a master (its role: {role})"
                )
            connection.disconnect()
            manager.passed_over(address)
        raise failure


class _MasterSSLConnection(_MasterConnection, SSLConnection):
    pass


def role_in(hello: Any) -> str:
    """The ``role`` in a ``HELLO`` reply: a map on RESP3, its keys and
    values in turn on RESP2; bytes, or text if the client decodes."""
    pairs = hello.items() if isinstance(hello, dict) else zip(hello[::2], hello[1::2], strict=True)
    for key, value in pairs:
        if _text(key) == "role":
            return _text(value)
    return "unknown"


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class _MasterPool(SentinelConnectionPool):
    """The master's pool, of connections that check the server is a master,
    holding the replicas' when the URL asked for replica reads."""

    replicas: SentinelConnectionPool | None = None

    def __init__(self, service_name: str, sentinel_manager: Any, **kwargs: Any) -> None:
        tls = kwargs.pop("ssl", False)
        kwargs["connection_class"] = _MasterSSLConnection if tls else _MasterConnection
        super().__init__(service_name, sentinel_manager, **kwargs)  # type: ignore[no-untyped-call]


def replica_pool(pool: Any) -> SentinelConnectionPool | None:
    """The pool of the replicas beside a master's pool :func:`connect_sentinel`
    made, if its URL asked for replica reads (``?replica_reads=yes``)."""
    return pool.replicas if isinstance(pool, _MasterPool) else None


def connect_sentinel_async(target: SentinelTarget, options: dict[str, Any]) -> redis.asyncio.Redis:
    """An asyncio redis-py client of the master of ``target``'s service
    (``connect_async(url, client="redis-py")``); its ``aclose()`` closes
    the connections to the sentinels too."""
    kwargs, asked, tls = _client_options(target, options)
    asked["retry"] = AsyncRetry(NoBackoff(), 0)
    sentinel = _AsyncSentinels(list(target.sentinels), sentinel_kwargs=asked)  # type: ignore[no-untyped-call]
    client: redis.asyncio.Redis = sentinel.master_for(
        target.service, redis_class=_AsyncSentinelClient, ssl=tls, **kwargs
    )
    return client


def _no_master(service: str, failures: list[str]) -> MasterNotFoundError:
    return MasterNotFoundError(f"no sentinel gave the master of {service!r}: {'; '.join(failures)}")


def _sentinel_name(sentinel: Any) -> str:
    where = sentinel.connection_pool.connection_kwargs
    return f"{where.get('host')}:{where.get('port')}"


def _master_in(
    sentinels: Any, masters: dict[str, Any], service: str, name: str, failures: list[str]
) -> tuple[str, int] | None:
    """The master's address in a sentinel's answer, else None (why, in ``failures``)."""
    state = masters.get(service)
    if state is None:
        failures.append(f"{name}: no master named {service!r}")
    elif not sentinels.check_master_state(state, service):
        failures.append(f"{name}: the master is down")
    else:
        return state["ip"], int(state["port"])
    return None


class _Sentinels(Sentinel):
    """redis-py's Sentinel, saying in one line why no master was found, and
    asking last a sentinel whose answer was passed over."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        # Each address named, the sentinel that last named it.
        self._named: dict[tuple[str, int], Any] = {}

    def discover_master(self, service_name: str) -> tuple[str, int]:
        failures = []
        for index, sentinel in enumerate(self.sentinels):
            try:
                masters: dict[str, Any] = cast(Any, sentinel).sentinel_masters()
            except (rx.ConnectionError, rx.TimeoutError, rx.ResponseError) as error:
                failures.append(f"{_sentinel_name(sentinel)}: {error}")
                continue
            found = _master_in(self, masters, service_name, _sentinel_name(sentinel), failures)
            if found is not None:  # the one that answered is asked first next time
                self.sentinels[0], self.sentinels[index] = sentinel, self.sentinels[0]
                self._named[found] = sentinel
                return found
        raise _no_master(service_name, failures)

    def passed_over(self, address: tuple[str, int]) -> None:
        """The server at ``address`` is not the master: the sentinel that
        named it is asked last from now on."""
        sentinel = self._named.pop(address, None)
        if sentinel in self.sentinels:
            self.sentinels.remove(sentinel)
            self.sentinels.append(sentinel)


class _AsyncSentinels(AsyncSentinel):
    """redis-py's asyncio Sentinel, saying in one line why no master was found."""

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        failures: list[str] = []
        for index, sentinel in enumerate(self.sentinels):
            try:
                masters: dict[str, Any] = await cast(Any, sentinel).sentinel_masters()
            except (rx.ConnectionError, rx.TimeoutError, rx.ResponseError) as error:
                failures.append(f"{_sentinel_name(sentinel)}: {error}")
                continue
            found = _master_in(self, masters, service_name, _sentinel_name(sentinel), failures)
            if found is not None:
                self.sentinels[0], self.sentinels[index] = sentinel, self.sentinels[0]
                return found
        raise _no_master(service_name, failures)


class _AsyncSentinelClient(redis.asyncio.Redis):
    """The master's client, closing the sentinels' connections with its own."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        pool: Any = self.connection_pool
        for sentinel in pool.sentinel_manager.sentinels:
            await sentinel.aclose()


def follow_master(pool: Any) -> None:
    """After a ``READONLY`` reply or a broken send: ask the sentinels where
    the master is; if it moved, the pool's idle connections close, and the
    next ones connect to the new master. Raises what asking raises."""
    if isinstance(pool, SentinelConnectionPool):
        pool.get_master_address()  # type: ignore[no-untyped-call]


async def afollow_master(pool: Any) -> None:
    """:func:`follow_master` for an asyncio redis-py client's pool."""
    if isinstance(pool, AsyncSentinelConnectionPool):
        await pool.get_master_address()  # type: ignore[no-untyped-call]


def close_sentinels(pool: Any) -> None:
    """Close the connections to the sentinels, and to the replicas, of a
    client :func:`connect_sentinel` made."""
    if isinstance(pool, SentinelConnectionPool):
        replicas = replica_pool(pool)
        if replicas is not None:
            replicas.disconnect()
        pool.sentinel_manager.close()
