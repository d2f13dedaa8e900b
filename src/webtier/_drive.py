"""The only code that talks to Redis: executors for the actions of
:mod:`webtier._wire`, and the loops that drive operations through them.

An executor writes a pipeline on a connection it takes from redis-py's pool
(the sync one keeps it for a later call: see :mod:`webtier._connections`)
and reads the replies itself. It never goes through ``execute_command``:
redis-py retries there after a timeout and would apply an increment twice.
Whether to send again is decided in :mod:`webtier._wire` alone.

Four executors (sync and asyncio, single server and Cluster) differ only in
how they find a connection; everything else is shared. The loops also carry
out an operation's :class:`~webtier._protocol.Call` (a database query): in
the caller's thread, or in a worker thread under asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis import exceptions as rx

from webtier._connections import checkin, checkout, pack
from webtier._protocol import Call, Command, Gather, Op, Reply, Step
from webtier._wire import (
    NOT_DONE,
    Action,
    Address,
    Batch,
    Locate,
    Outcome,
    Refresh,
    Send,
    Sleep,
    exchange,
    flat,
    planned,
    settled,
)
from webtier.config import RetryPolicy
from webtier.errors import ConfigError

T = TypeVar("T")

# Failures of the link itself, as opposed to error replies. BusyLoadingError
# derives from ConnectionError in redis-py but is a reply; it is read apart.
_IO_ERRORS = (rx.ConnectionError, rx.TimeoutError, OSError)
_REPLY_ERRORS = (rx.ResponseError, rx.BusyLoadingError)

SyncClient = redis.Redis | redis.cluster.RedisCluster
AsyncClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster


# -- shared --------------------------------------------------------------------------


def _node(cluster: Any, target: Any) -> Any:
    """The cluster node a send goes to (same calls on sync and asyncio clusters)."""
    if isinstance(target, str):
        return cluster.get_node_from_key(target)
    if isinstance(target, Address):
        node = cluster.get_node(host=target.host, port=target.port)
        if node is None:
            raise rx.ConnectionError(f"no known node at {target.host}:{target.port}")
        return node
    return target


def _call(op: Op[Any], call: Call) -> Step | Call:
    """Carry out a Call; send its result into ``op``, or throw its error in."""
    try:
        result = call.blocking()
    except Exception as error:
        return op.throw(error)
    return op.send(result)


async def _acall(call: Call) -> tuple[Any, Exception | None]:
    # The result goes into the operation in run(), not here: an operation
    # that returns right after a Call raises StopIteration, which a
    # coroutine would turn into RuntimeError.
    try:
        if call.awaitable is not None:
            return await call.awaitable(), None
        return await asyncio.to_thread(call.blocking), None
    except Exception as error:
        return None, error


def _locate(cluster: Any, route: str) -> Any:
    if cluster is None:
        return ("server", None)
    try:
        node = cluster.get_node_from_key(route)
    except (rx.RedisError, OSError) as error:
        return error
    return (node.name, node)


# -- sync ------------------------------------------------------------------------------


def _pipeline(pool: Any, commands: Sequence[Command]) -> Outcome:
    try:
        conn = checkout(pool)
    except _IO_ERRORS as error:
        return Outcome([], error, delivered=False)
    replies: list[Reply] = []
    try:
        conn.send_packed_command(pack(conn, commands))
        # From the parser itself: it hands error replies over as values, where
        # the connection's read_response raises them (and formats its address
        # for a message, on every reply). Link failures are handled below.
        read = conn._parser.read_response
        for _ in commands:
            try:
                replies.append(read(disable_decoding=True))
            except _REPLY_ERRORS as error:
                replies.append(error)
    except _IO_ERRORS as error:
        conn.disconnect()
        return Outcome(replies, error, delivered=True)
    except BaseException:
        conn.disconnect()  # half-read: never hand it back as it is
        raise
    finally:
        checkin(pool, conn)
    return Outcome(replies)


class SyncTransport:
    """Runs operations on a sync redis-py client (``Redis`` or ``RedisCluster``)."""

    def __init__(self, client: SyncClient, policy: RetryPolicy) -> None:
        if isinstance(client, redis.cluster.RedisCluster):
            self._cluster: redis.cluster.RedisCluster | None = client
        elif isinstance(client, redis.Redis):
            if client.connection is not None:
                raise ConfigError(
                    "single_connection_client clients are not supported; pass a pooled client"
                )
            self._cluster = None
            self._pool = client.connection_pool
        else:
            raise ConfigError(f"expected a sync redis-py client, got {type(client).__name__}")
        self.client = client
        self.policy = policy

    def run(self, op: Op[T]) -> T:
        try:
            step = next(op)
            while True:
                if isinstance(step, Call):
                    step = _call(op, step)
                else:
                    step = op.send(self.exchange(step))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def exchange(self, step: Step) -> Any:
        first = None
        if self._cluster is None and not isinstance(step, Gather) and step:
            # One server: the hot path needs no Locate and no generator.
            commands = planned(step)
            first = _pipeline(self._pool, flat(commands))
            done = settled(step, first, commands)
            if done is not NOT_DONE:
                return done
        wire = exchange(step, self.policy, first)
        try:
            action = next(wire)
            while True:
                action = wire.send(self._act(action))
        except StopIteration as done:
            return done.value

    def _act(self, action: Action) -> Any:
        if type(action) is Send:
            return self._send(action)
        if type(action) is Batch:
            return [self._send(send) for send in action.sends]
        if type(action) is Locate:
            return [_locate(self._cluster, route) for route in action.routes]
        if type(action) is Refresh:
            if self._cluster is not None:
                # If the map cannot be reloaded now, the next send fails and
                # is retried within the budget.
                with contextlib.suppress(rx.RedisError, OSError):
                    self._cluster.nodes_manager.initialize()
            return None
        assert type(action) is Sleep
        time.sleep(action.seconds)
        return None

    def _send(self, send: Send) -> Outcome:
        if self._cluster is None:
            return _pipeline(self._pool, send.commands)
        try:
            node = _node(self._cluster, send.target)
            pool = self._cluster.get_redis_connection(node).connection_pool
        except (rx.RedisError, OSError) as error:
            return Outcome([], error, delivered=False)
        return _pipeline(pool, send.commands)


# -- asyncio ---------------------------------------------------------------------------


async def _apipeline(
    acquire: Callable[[], Awaitable[Any]],
    release: Callable[[Any], Awaitable[None]],
    commands: Sequence[Command],
) -> Outcome:
    try:
        conn = await acquire()
    except _IO_ERRORS as error:
        return Outcome([], error, delivered=False)
    replies: list[Reply] = []
    try:
        await conn.send_packed_command(pack(conn, commands))
        for _ in commands:
            try:
                replies.append(await conn.read_response(disable_decoding=True))
            except _REPLY_ERRORS as error:
                replies.append(error)
    except _IO_ERRORS as error:
        await conn.disconnect(nowait=True)
        return Outcome(replies, error, delivered=True)
    except BaseException:  # cancelled mid-exchange: the connection is out of step
        await conn.disconnect(nowait=True)
        raise
    finally:
        await release(conn)
    return Outcome(replies)


class AsyncTransport:
    """Runs operations on an asyncio redis-py client (``Redis`` or ``RedisCluster``)."""

    def __init__(self, client: AsyncClient, policy: RetryPolicy) -> None:
        if isinstance(client, redis.asyncio.cluster.RedisCluster):
            self._cluster: redis.asyncio.cluster.RedisCluster | None = client
        elif isinstance(client, redis.asyncio.Redis):
            if client.connection is not None:
                raise ConfigError(
                    "single_connection_client clients are not supported; pass a pooled client"
                )
            self._cluster = None
            self._pool = client.connection_pool
        else:
            raise ConfigError(f"expected an asyncio redis-py client, got {type(client).__name__}")
        self.client = client
        self.policy = policy

    async def run(self, op: Op[T]) -> T:
        try:
            step = next(op)
            while True:
                if isinstance(step, Call):
                    result, error = await _acall(step)
                    step = op.send(result) if error is None else op.throw(error)
                else:
                    step = op.send(await self.exchange(step))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def exchange(self, step: Step) -> Any:
        first = None
        if self._cluster is None and not isinstance(step, Gather) and step:
            # One server: the hot path needs no Locate and no generator.
            commands = planned(step)
            pool = self._pool
            first = await _apipeline(pool.get_connection, pool.release, flat(commands))
            done = settled(step, first, commands)
            if done is not NOT_DONE:
                return done
        wire = exchange(step, self.policy, first)
        try:
            action = next(wire)
            while True:
                action = wire.send(await self._act(action))
        except StopIteration as done:
            return done.value

    async def _act(self, action: Action) -> Any:
        if type(action) is Send:
            return await self._send(action)
        if type(action) is Batch:
            return list(await asyncio.gather(*(self._send(send) for send in action.sends)))
        if self._cluster is not None:
            await self._cluster.initialize()
        if type(action) is Locate:
            return [_locate(self._cluster, route) for route in action.routes]
        if type(action) is Refresh:
            if self._cluster is not None:
                with contextlib.suppress(rx.RedisError, OSError):
                    await self._cluster.nodes_manager.initialize()
            return None
        assert type(action) is Sleep
        await asyncio.sleep(action.seconds)
        return None

    async def _send(self, send: Send) -> Outcome:
        if self._cluster is None:
            pool = self._pool
            return await _apipeline(pool.get_connection, pool.release, send.commands)
        try:
            await self._cluster.initialize()
            node = _node(self._cluster, send.target)
        except (rx.RedisError, OSError) as error:
            return Outcome([], error, delivered=False)

        async def acquire() -> Any:
            conn = node.acquire_connection()
            try:
                await conn.connect()
            except BaseException:
                node.release(conn)
                raise
            return conn

        async def release(conn: Any) -> None:
            node.release(conn)

        return await _apipeline(acquire, release, send.commands)
