"""The only code that talks to Redis: executors for the actions of
:mod:`webtier._core.wire`, and the loops that drive operations through them.

An executor writes a pipeline on a connection it takes from redis-py's pool
(the sync one keeps it for a later call: see :mod:`webtier._core.redispy`)
and reads the replies itself. It never goes through ``execute_command``:
redis-py retries there after a timeout and would apply an increment twice.
Whether to send again is decided in :mod:`webtier._core.wire` alone.

Four executors (sync and asyncio, single server and Cluster) differ only in
how they find a connection; everything else is shared. The loops also carry
out an operation's :class:`~webtier._core.protocol.Call` (a database query): in
the caller's thread, or in a worker thread under asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis import exceptions as rx

from webtier._core.actions import (
    Action,
    Address,
    Batch,
    Locate,
    Outcome,
    Refresh,
    Send,
    Sleep,
    TimeLimitReached,
)
from webtier._core.deadline import Budget, current_limit, publish, unpublish
from webtier._core.protocol import Call, Command, Op, Reply, Step
from webtier._core.redis_errors import as_webtier_error
from webtier._core.redispy import checkin, checkout, pack, reply_reader
from webtier._core.wire import NOT_DONE, exchange, flat, planned, settled
from webtier.config import RetryPolicy
from webtier.errors import ConfigError

T = TypeVar("T")

# Failures of the link itself, as opposed to error replies. BusyLoadingError
# derives from ConnectionError in redis-py but is a reply; it is read apart.
_IO_ERRORS = (rx.ConnectionError, rx.TimeoutError, OSError)
_REPLY_ERRORS = (rx.ResponseError, rx.BusyLoadingError)
# Everything redis-py raises when no node can be found or reached, including
# its cluster errors, which do not derive from RedisError.
_UNREACHABLE = (rx.RedisError, rx.RedisClusterException, OSError)

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


def _call(op: Op[Any], call: Call, budget: Budget | None) -> Step | Call:
    """Carry out a Call; send its result into ``op``, or throw its error in.
    Its time does not count against the operation's time limit."""
    began = time.monotonic()
    try:
        result = call.blocking()
    except Exception as error:
        return op.throw(error)
    finally:
        if budget is not None:
            budget.deadline += time.monotonic() - began
    return op.send(result)


def _throw(op: Op[Any], error: Exception) -> Step | Call:
    """Throw a step's failure into ``op``, at its ``yield``, where it may
    handle it (a web flow serves a visitor as anonymous on
    ``RedisUnavailable``): a redis-py or OS error as the webtier error it
    means, anything else as it is. An op that does not catch it raises it."""
    if isinstance(error, _UNREACHABLE):
        error = as_webtier_error(error)
    return op.throw(error)


def _late(outcome: Outcome, budget: Budget | None) -> Outcome:
    """A failed send that ended past the deadline ends the exchange: no time
    is left for another try."""
    if budget is not None and outcome.error is not None and budget.left() <= 0:
        error = outcome.error
        if not isinstance(error, TimeLimitReached):
            late = TimeLimitReached(f"no answer within the time limit ({error})")
            late.__cause__ = error
            outcome.error = late
    return outcome


def _out_of_time() -> Outcome:
    return Outcome(
        [], TimeLimitReached("the time limit was reached before Redis answered"), delivered=False
    )


def _sleep_for(seconds: float, budget: Budget | None) -> float:
    return seconds if budget is None else max(0.0, min(seconds, budget.left()))


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
    except _UNREACHABLE as error:
        return error
    return (node.name, node)


# -- sync ------------------------------------------------------------------------------


def _pipeline(pool: Any, commands: Sequence[Command], budget: Budget | None = None) -> Outcome:
    if budget is not None and budget.left() <= 0:
        return _out_of_time()
    try:
        conn = checkout(pool)
    except _IO_ERRORS as error:
        return _late(Outcome([], error, delivered=False), budget)
    replies: list[Reply] = []
    try:
        conn.send_packed_command(pack(conn, commands))
        read = reply_reader(conn)  # error replies as values; link failures below
        for _ in commands:
            try:
                if budget is None:
                    replies.append(read(disable_decoding=True))
                else:  # wait no longer than the time left
                    wait = min(max(budget.left(), 0.001), conn.socket_timeout or math.inf)
                    replies.append(read(disable_decoding=True, timeout=wait))
            except _REPLY_ERRORS as error:
                replies.append(error)
    except _IO_ERRORS as error:
        conn.disconnect()
        return _late(Outcome(replies, error, delivered=True), budget)
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
        self.one_node = self._cluster is None

    def run(self, op: Op[T]) -> T:
        limit = current_limit(self.policy.time_limit)
        if limit is None:
            return self._drive(op, None)
        budget = Budget(limit)
        published = publish(budget)  # for the connections webtier.connect() made
        try:
            return self._drive(op, budget)
        finally:
            unpublish(published)

    def _drive(self, op: Op[T], budget: Budget | None) -> T:
        try:
            step = next(op)
            while True:
                if isinstance(step, Call):
                    step = _call(op, step, budget)
                    continue
                try:
                    replies = self.exchange(step, budget)
                except Exception as error:
                    step = _throw(op, error)
                else:
                    step = op.send(replies)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def exchange(self, step: Step, budget: Budget | None = None) -> Any:
        first = None
        if self._cluster is None:
            # One server: the hot path needs no Locate and no generator.
            commands = planned(step)
            if not commands:
                return []
            first = _pipeline(self._pool, flat(commands), budget)
            done = settled(step, first, commands)
            if done is not NOT_DONE:
                return done
        wire = exchange(step, self.policy, first)
        try:
            action = next(wire)
            while True:
                action = wire.send(self._act(action, budget))
        except StopIteration as done:
            return done.value

    def _act(self, action: Action, budget: Budget | None) -> Any:
        if type(action) is Send:
            return self._send(action, budget)
        if type(action) is Batch:
            return [self._send(send, budget) for send in action.sends]
        if type(action) is Locate:
            return [_locate(self._cluster, route) for route in action.routes]
        if type(action) is Refresh:
            if self._cluster is not None and (budget is None or budget.left() > 0):
                # If the map cannot be reloaded now, the next send fails and
                # is retried within the budget.
                with contextlib.suppress(*_UNREACHABLE):
                    self._cluster.nodes_manager.initialize()
            return None
        assert type(action) is Sleep
        time.sleep(_sleep_for(action.seconds, budget))
        return None

    def _send(self, send: Send, budget: Budget | None) -> Outcome:
        if self._cluster is None:
            return _pipeline(self._pool, send.commands, budget)
        try:
            node = _node(self._cluster, send.target)
            pool = self._cluster.get_redis_connection(node).connection_pool
        except _UNREACHABLE as error:
            return _late(Outcome([], error, delivered=False), budget)
        return _pipeline(pool, send.commands, budget)


# -- asyncio ---------------------------------------------------------------------------


async def _apipeline(
    acquire: Callable[[], Awaitable[Any]],
    release: Callable[[Any], Awaitable[None]],
    commands: Sequence[Command],
    budget: Budget | None = None,
) -> Outcome:
    replies: list[Reply] = []
    if budget is None:
        return await _apipe(acquire, release, commands, replies, [False])
    left = budget.left()
    if left <= 0:
        return _out_of_time()
    written = [False]
    try:
        # The whole exchange, waiting for a pooled connection and connecting
        # included, ends at the deadline: cancelled there, it closes its
        # connection (out of step) and asyncio.timeout raises TimeoutError.
        async with asyncio.timeout(left):
            outcome = await _apipe(acquire, release, commands, replies, written)
    except TimeoutError:
        late = TimeLimitReached("no answer within the time limit")
        return Outcome(replies, late, delivered=written[0])
    return _late(outcome, budget)


async def _apipe(
    acquire: Callable[[], Awaitable[Any]],
    release: Callable[[Any], Awaitable[None]],
    commands: Sequence[Command],
    replies: list[Reply],
    written: list[bool],
) -> Outcome:
    try:
        conn = await acquire()
    except _IO_ERRORS as error:
        return Outcome([], error, delivered=False)
    try:
        written[0] = True  # from here on, some of it may reach the server
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


async def _ready(conn: Any) -> None:
    """Connect ``conn``, first closing it if the server closed it (a restart)
    or data waits on it, so that such a failure stays "not sent" and a write
    is never wrongly reported as maybe applied."""
    if conn.is_connected:
        try:
            stale = await conn.can_read()  # data or EOF waiting: no read made
        except _IO_ERRORS:
            stale = True
        if stale:
            await conn.disconnect()
    await conn.connect()


async def _acquire_checked(node: Any) -> Any:
    """A connection of a cluster node, ready for a write (the node's free
    list hands connections out unchecked)."""
    conn = node.acquire_connection()
    try:
        await _ready(conn)
    except BaseException:
        node.release(conn)
        raise
    return conn


async def _acquire_pooled(pool: Any) -> Any:
    """A connection of a single server's pool, ready for a write. redis-py's
    pool checks the connections it hands out only while its maintenance
    notifications are off, and they are on ("auto") by default: so a
    connection the server closed would be written on."""
    conn = await pool.get_connection()
    try:
        await _ready(conn)
    except BaseException:
        await pool.release(conn)
        raise
    return conn


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
        self.one_node = self._cluster is None

    async def run(self, op: Op[T]) -> T:
        limit = current_limit(self.policy.time_limit)
        budget = None if limit is None else Budget(limit)
        try:
            step = next(op)
            while True:
                if isinstance(step, Call):
                    began = time.monotonic()
                    result, error = await _acall(step)
                    if budget is not None:  # a Call's time does not count
                        budget.deadline += time.monotonic() - began
                    step = op.send(result) if error is None else op.throw(error)
                    continue
                try:
                    replies = await self.exchange(step, budget)
                except Exception as error:
                    step = _throw(op, error)
                else:
                    step = op.send(replies)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def exchange(self, step: Step, budget: Budget | None = None) -> Any:
        first = None
        if self._cluster is None:
            # One server: the hot path needs no Locate and no generator.
            commands = planned(step)
            if not commands:
                return []
            pool = self._pool
            first = await _apipeline(
                partial(_acquire_pooled, pool), pool.release, flat(commands), budget
            )
            done = settled(step, first, commands)
            if done is not NOT_DONE:
                return done
        wire = exchange(step, self.policy, first)
        try:
            action = next(wire)
            while True:
                action = wire.send(await self._act(action, budget))
        except StopIteration as done:
            return done.value

    async def _act(self, action: Action, budget: Budget | None) -> Any:
        if type(action) is Send:
            return await self._send(action, budget)
        if type(action) is Batch:
            return list(await asyncio.gather(*(self._send(s, budget) for s in action.sends)))
        if type(action) is Locate:
            failed = await self._initialized(budget)
            if failed is not None:
                return [failed for _ in action.routes]
            return [_locate(self._cluster, route) for route in action.routes]
        if type(action) is Refresh:
            if self._cluster is not None and (budget is None or budget.left() > 0):
                # If the map cannot be reloaded now, the next send fails and
                # is retried within the budget.
                with contextlib.suppress(*_UNREACHABLE, TimeoutError):
                    async with asyncio.timeout(None if budget is None else budget.left()):
                        await self._cluster.nodes_manager.initialize()
            return None
        assert type(action) is Sleep
        await asyncio.sleep(_sleep_for(action.seconds, budget))
        return None

    async def _initialized(self, budget: Budget | None) -> BaseException | None:
        """Loads the cluster's slot map if the client has none yet (an
        asyncio cluster client connects on first use); the error if it
        cannot."""
        if self._cluster is None:
            return None
        try:
            async with asyncio.timeout(None if budget is None else max(budget.left(), 0)):
                await self._cluster.initialize()
        except TimeoutError:
            return TimeLimitReached("no node answered within the time limit")
        except _UNREACHABLE as error:
            return error
        return None

    async def _send(self, send: Send, budget: Budget | None) -> Outcome:
        if self._cluster is None:
            pool = self._pool
            return await _apipeline(
                partial(_acquire_pooled, pool), pool.release, send.commands, budget
            )
        failed = await self._initialized(budget)
        if failed is not None:
            return _late(Outcome([], failed, delivered=False), budget)
        try:
            node = _node(self._cluster, send.target)
        except _UNREACHABLE as error:
            return _late(Outcome([], error, delivered=False), budget)

        async def acquire() -> Any:
            return await _acquire_checked(node)

        async def release(conn: Any) -> None:
            node.release(conn)

        return await _apipeline(acquire, release, send.commands, budget)
