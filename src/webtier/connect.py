"""Clients from one URL, and :func:`open` for a ready WebTier: redis-py's
sync clients (:func:`connect`), webtier's own asyncio client or redis-py's
(:func:`connect_async`).

URL forms (the cluster form is webtier's own; the others are redis-py's):

* ``redis://[user:password@]host[:port][/db]`` — one server over TCP
* ``rediss://...`` — the same over TLS (``?ssl_ca_certs=...`` etc.)
* ``unix:///path/to/redis.sock[?db=0]`` — one server on a unix socket
* ``redis+cluster://[user:password@]host:port[,host:port...]`` — Redis
  Cluster, from one or more seed nodes; ``rediss+cluster://`` over TLS
* ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``
  — the master of a Sentinel deployment, found through its sentinels and
  followed through failovers; the sentinels' own credentials, if any, in
  the query (``sentinel_password=``, ``sentinel_username=``);
  ``rediss+sentinel://`` over TLS (see :mod:`webtier._core.sentinel`);
  ``?replica_reads=yes`` sends the reads that tolerate lag to a replica
  (see :func:`webtier.replica_reads`)

Query parameters are redis-py's (``socket_timeout=2.5``,
``client_name=shop``...). Unless the URL sets them, clients get timeouts
fit for a web tier (connect within 2 s, a reply within 5 s) and no redis-py
retry: for webtier's operations webtier retries itself, by the rules of
:mod:`webtier._core.wire`; for your own commands on the same client, pass
``retry=`` if you want redis-py's. The connections of these clients also
keep a webtier operation's time limit (:func:`webtier.time_limit`) while
they connect, so a hung server costs an operation no more than its limit
even on a new connection (webtier's asyncio client bounds every wait by it:
see docs/transport.md).

Errors are webtier's: a cluster none of whose seeds answers raises
:class:`~webtier.errors.RedisUnavailable`; a seed that is not in cluster
mode, a ``rediss://`` URL on a plain-TCP server (within the connect timeout:
:mod:`webtier._core.tls_check`) or a database number the server does not
have raise :class:`~webtier.errors.ConfigError`, sync or asyncio, at once
(``connect()`` of a cluster) or on the first operation; so does a URL on
something that answers, but not as Redis ("127.0.0.1:8000 answered, but not
as Redis (it looks like HTTP)": :mod:`webtier._core.not_redis`). A new
connection is greeted within the connect timeout, not the socket timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast, overload
from urllib.parse import parse_qs, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis import exceptions as rx
from redis.backoff import NoBackoff
from redis.retry import Retry

from webtier._core.deadline import time_left
from webtier._core.mux import MuxClient
from webtier._core.mux.sentinel import MasterFinder
from webtier._core.mux.settings import settings_from
from webtier._core.not_redis import greet
from webtier._core.redis_errors import as_webtier_error
from webtier._core.sentinel import (
    REPLICA_READS,
    SentinelTarget,
    close_sentinels,
    connect_sentinel,
    connect_sentinel_async,
    parse_sentinel,
    replica_pool,
    split_hosts,
)
from webtier._core.tls_check import AsyncTlsChecked, TlsChecked
from webtier.config import Config
from webtier.errors import ConfigError

# connect_async on a single server: connections at most, and seconds a request
# waits for one when all are busy (redis-py's plain pool would fail at once).
ASYNC_MAX_CONNECTIONS = 100
ASYNC_POOL_TIMEOUT = 20.0

DEFAULTS: dict[str, Any] = {
    "socket_connect_timeout": 2.0,
    "socket_timeout": 5.0,
    "health_check_interval": 30,
    # webtier decides itself what may be sent again (see webtier._core.wire);
    # redis-py's own retry would re-send increments after a timeout, and
    # stack its backoff on top of webtier's.
    "retry": Retry(NoBackoff(), 0),
}
_SCHEMES = {
    "redis": ("server", "redis"),
    "rediss": ("server", "rediss"),
    "unix": ("server", "unix"),
    "redis+cluster": ("cluster", "redis"),
    "rediss+cluster": ("cluster", "rediss"),
    "redis+sentinel": ("sentinel", "redis"),
    "rediss+sentinel": ("sentinel", "rediss"),
}


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed URL: what to connect to, in terms redis-py takes."""

    cluster: bool
    url: str  # a redis-py URL (for a cluster: its first seed, with the options)
    seeds: tuple[tuple[str, int], ...]  # every seed node of a cluster
    options: dict[str, Any]
    sentinel: SentinelTarget | None = None  # the sentinels and service of a redis+sentinel URL


def parse(url: str, **options: Any) -> Target:
    """Check a webtier URL and split it for redis-py."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(f"not a Redis URL: {url!r} (e.g. redis://localhost:6379/0)")
    scheme = url.split("://", 1)[0]
    if scheme.lower() not in _SCHEMES:
        raise ConfigError(f"unknown URL scheme {scheme!r}; use one of {', '.join(_SCHEMES)}")
    kind, base = _SCHEMES[scheme.lower()]
    query = parse_qs(urlsplit(url).query)
    merged = {k: v for k, v in DEFAULTS.items() if k not in query} | options
    if kind == "sentinel":
        return Target(False, url, (), merged, parse_sentinel(url, base))
    if REPLICA_READS in query:
        raise ConfigError(f"{REPLICA_READS} is for Sentinel URLs (redis+sentinel://), got {url!r}")
    if kind == "server":
        return Target(False, url, (), merged)
    parts, userinfo, seeds = split_hosts(url, base, "cluster seeds")
    if parts.path not in ("", "/"):
        raise ConfigError("Redis Cluster has only database 0; drop the path from the URL")
    auth = f"{userinfo}@" if userinfo else ""
    first = f"{base}://{auth}{seeds[0][0]}:{seeds[0][1]}/" + (
        f"?{parts.query}" if parts.query else ""
    )
    return Target(True, first, seeds, merged)


def connect(url: str, **options: Any) -> redis.Redis | redis.cluster.RedisCluster:
    """A sync redis-py client for ``url``; keyword options go to redis-py.

    A cluster client reads the slot map at once: with no seed reachable this
    raises RedisUnavailable (a server client connects on first use)."""
    target = parse(url, **options)
    if target.sentinel is not None:
        client = connect_sentinel(target.sentinel, target.options)
        for pool in (client.connection_pool, replica_pool(client.connection_pool)):
            if pool is not None:
                _bound(pool)
        return client
    if not target.cluster:
        client = redis.Redis.from_url(target.url, **target.options)
        _bound(client.connection_pool)
        return client
    nodes = [cast(Any, redis.cluster.ClusterNode)(h, p) for h, p in target.seeds[1:]]
    try:
        cluster = redis.cluster.RedisCluster.from_url(
            target.url, startup_nodes=nodes, **target.options
        )
    except (rx.RedisError, rx.RedisClusterException, OSError) as error:
        raise as_webtier_error(error) from error
    # Node clients made later (after a failover, say) take these options.
    manager = cast(Any, cluster).nodes_manager
    manager.connection_kwargs["connection_class"] = _time_bound(
        manager.connection_kwargs.get("connection_class", redis.Connection)
    )
    for node in cast(Any, cluster).get_nodes():
        if node.redis_connection is not None:
            _bound(node.redis_connection.connection_pool)
    return cluster


class _TimeBound:
    """Mixed into the connection classes of the sync clients connect()
    makes. A new connection connects and is greeted within the connect
    timeout (its greeting not left to the longer socket timeout), or within
    the time left of a webtier operation's time limit if that is shorter;
    its first words are a PING ending in an empty line, so that something
    that answers, but not as Redis, is said at once (see
    :mod:`webtier._core.not_redis`)."""

    socket_connect_timeout: float | None
    socket_timeout: float | None

    def connect(self) -> None:
        left = time_left()
        if left is not None and left <= 0:
            raise rx.TimeoutError("the time limit was reached before connecting")
        saved = self.socket_connect_timeout, self.socket_timeout
        limit = saved[0] if left is None else min(left, saved[0] or left)
        self.socket_connect_timeout = self.socket_timeout = limit
        try:
            super().connect()  # type: ignore[misc]
        finally:
            self.socket_connect_timeout, self.socket_timeout = saved
            # The socket and its parser back to the client's own timeout.
            cast(Any, self).update_current_socket_timeout(-1)

    def on_connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        this = cast(Any, self)
        greet(this._sock, this._host_error())
        super().on_connect_check_health(*args, **kwargs)  # type: ignore[misc]


_TIME_BOUND: dict[type, type] = {}


def _time_bound(kind: type) -> type:
    if issubclass(kind, _TimeBound):
        return kind
    if kind not in _TIME_BOUND:
        mixins = (
            (_TimeBound, TlsChecked) if issubclass(kind, redis.SSLConnection) else (_TimeBound,)
        )
        _TIME_BOUND[kind] = type(f"TimeBound{kind.__name__}", (*mixins, kind), {})
    return _TIME_BOUND[kind]


def _tls_checked_async(kind: type) -> type:
    if not issubclass(kind, redis.asyncio.SSLConnection) or issubclass(kind, AsyncTlsChecked):
        return kind
    if kind not in _TIME_BOUND:
        _TIME_BOUND[kind] = type(f"TlsChecked{kind.__name__}", (AsyncTlsChecked, kind), {})
    return _TIME_BOUND[kind]


class _AsyncClusterClient(redis.asyncio.cluster.RedisCluster):
    """The asyncio cluster client connect_async() makes: it reads the slot
    map on first use, so a seed that is not in cluster mode is found there;
    it says so at once (ConfigError) instead of being retried as an outage."""

    async def initialize(self, *args: Any, **kwargs: Any) -> redis.asyncio.cluster.RedisCluster:
        try:
            await super().initialize(*args, **kwargs)
        except rx.RedisClusterException as error:
            meaning = as_webtier_error(error)
            if isinstance(meaning, ConfigError):
                raise meaning from error
            raise
        return self


def _bound(pool: Any) -> None:
    pool.connection_class = _time_bound(pool.connection_class)


@overload
def connect_async(
    url: str, *, client: Literal["webtier"] = "webtier", **options: Any
) -> MuxClient: ...


@overload
def connect_async(
    url: str, *, client: Literal["redis-py"], **options: Any
) -> redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster: ...


def connect_async(
    url: str, *, client: str = "webtier", **options: Any
) -> MuxClient | redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster:
    """An asyncio client for ``url``: webtier's own (:class:`MuxClient`, one
    auto-pipelined connection per node; see docs/transport.md), or with
    ``client="redis-py"`` a redis-py client, whose keyword options are
    redis-py's (on a single server its pool then waits for a free connection
    when all ``max_connections`` (100) are busy, up to ``pool_timeout``, 20 s).

    webtier's client takes redis-py's connection options (timeouts, TLS,
    ``client_name``, ``protocol``...) and its own: ``connections`` per node
    (1), ``max_in_flight`` commands and ``max_queued_bytes`` per connection,
    past which a burst waits."""
    if client == "webtier":
        return _mux_client(url, options)
    if client != "redis-py":
        raise ConfigError(f"client must be 'webtier' or 'redis-py', got {client!r}")
    return _redispy_async(url, options)


def _mux_client(url: str, options: dict[str, Any]) -> MuxClient:
    target = parse(url, **options)
    if target.sentinel is not None:
        settings = settings_from(target.sentinel.server_url, target.options)
        return MuxClient(settings, finder=MasterFinder(target.sentinel, settings))
    return MuxClient(settings_from(target.url, target.options), target.seeds)


def _redispy_async(
    url: str, options: dict[str, Any]
) -> redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster:
    target = parse(url, **options)
    if target.sentinel is not None:
        return connect_sentinel_async(target.sentinel, target.options)
    if target.cluster:
        nodes = [redis.asyncio.cluster.ClusterNode(h, p) for h, p in target.seeds[1:]]
        cluster = _AsyncClusterClient.from_url(target.url, startup_nodes=nodes, **target.options)
        manager = cast(Any, cluster).nodes_manager
        kind = _tls_checked_async(manager.connection_kwargs.get("connection_class", object))
        if kind is not object:
            manager.connection_kwargs["connection_class"] = kind
        for node in manager.startup_nodes.values():
            node.connection_class = _tls_checked_async(node.connection_class)
        return cluster
    # One asyncio process may have hundreds of requests in flight: past the
    # pool's cap a request waits for a free connection (up to ``pool_timeout``
    # seconds) instead of failing at once with "Too many connections".
    options = dict(target.options)
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        target.url,
        max_connections=options.pop("max_connections", ASYNC_MAX_CONNECTIONS),
        timeout=options.pop("pool_timeout", ASYNC_POOL_TIMEOUT),
        **options,
    )
    pool.connection_class = _tls_checked_async(pool.connection_class)
    return redis.asyncio.Redis.from_pool(pool)


def disconnect(client: redis.Redis | redis.cluster.RedisCluster) -> None:
    """Close a sync client and every connection it holds.

    For Redis Cluster, redis-py 8's ``close()`` leaves the pools of its node
    clients connected (their sockets linger until garbage collection); this
    closes them too.
    """
    if isinstance(client, redis.cluster.RedisCluster):
        for node in cast(Any, client).get_nodes():
            if node.redis_connection is not None:
                node.redis_connection.connection_pool.disconnect()
    else:
        close_sentinels(client.connection_pool)
    client.close()


@contextlib.contextmanager
def open(
    url: str | None = None, *, config: Config | None = None, data_dir: str | Path | None = None
) -> Iterator[Any]:
    """A :class:`webtier.sync.WebTier` on ``url``, closed on exit.

    Without a URL, webtier starts a redis-server of its own on a unix socket
    in ``data_dir`` (see :class:`webtier.embedded.EmbeddedRedis`) and stops it
    on exit."""
    from webtier.embedded import EmbeddedRedis
    from webtier.sync import WebTier

    with contextlib.ExitStack() as stack:
        if url is None:
            url = stack.enter_context(EmbeddedRedis(data_dir)).url
        client = connect(url)
        stack.callback(disconnect, client)
        yield WebTier(client, config)


@contextlib.asynccontextmanager
async def open_async(
    url: str | None = None, *, config: Config | None = None, data_dir: str | Path | None = None
) -> AsyncIterator[Any]:
    """:func:`open` for asyncio: yields a :class:`webtier.aio.WebTier`."""
    from webtier.aio import WebTier
    from webtier.embedded import EmbeddedRedis

    async with contextlib.AsyncExitStack() as stack:
        if url is None:
            url = stack.enter_context(EmbeddedRedis(data_dir)).url
        client = connect_async(url)
        stack.push_async_callback(client.aclose)
        yield WebTier(client, config)
