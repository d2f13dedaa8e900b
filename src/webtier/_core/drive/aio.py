"""The asyncio executors' shared driver, and the executor on redis-py's asyncio
clients: each exchange bounded by ``asyncio.timeout``, the sends of a batch
gathered."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
from redis.asyncio.sentinel import SentinelManagedConnection

from webtier._core.actions import (
    Action,
    Batch,
    Locate,
    Outcome,
    Refresh,
    Send,
    Sleep,
    TimeLimitReached,
)
from webtier._core.deadline import Budget, current_limit
from webtier._core.drive.shared import (
    _IO_ERRORS,
    _REPLY_ERRORS,
    _UNREACHABLE,
    AsyncClient,
    T,
    _acall,
    _late,
    _locate,
    _node,
    _out_of_time,
    _sleep_for,
    _throw,
    pool_of,
)
from webtier._core.protocol import Call, Command, Op, Reply, Step
from webtier._core.redispy import pack
from webtier._core.sentinel import afollow_master
from webtier._core.wire import NOT_DONE, exchange, flat, planned, settled
from webtier.config import RetryPolicy
from webtier.errors import ConfigError


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
        read = _reader(conn)
        for _ in commands:
            try:
                replies.append(await read(disable_decoding=True))
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


def _reader(conn: Any) -> Callable[..., Awaitable[Any]]:
    """``conn.read_response``; but a Sentinel master's connection's own turns a
    ``READONLY`` reply into a ``ConnectionError``, as if the write might
    have been applied: it is read as the refusal it is (nothing applied),
    and the wire asks the sentinels again and sends it to the new master."""
    if isinstance(conn, SentinelManagedConnection):
        return super(SentinelManagedConnection, conn).read_response
    return conn.read_response  # type: ignore[no-any-return]


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


class AsyncDriver:
    """What the asyncio executors share: running an operation (its Calls
    included) and carrying out the actions of the wire. An executor says
    how one send, a locate and a refresh are done, and makes the hot path's
    send itself in :meth:`exchange`."""

    policy: RetryPolicy

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
        raise NotImplementedError

    async def _wire(self, step: Step, first: Outcome | None, budget: Budget | None) -> Any:
        """The step through :func:`webtier._core.wire.exchange`, recovering
        from ``first`` (the hot path's outcome) when given."""
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
            return await self._locate(action.routes, budget)
        if type(action) is Refresh:
            if budget is None or budget.left() > 0:
                # If the map cannot be reloaded now, the next send fails and
                # is retried within the budget.
                with contextlib.suppress(*_UNREACHABLE, TimeoutError):
                    async with asyncio.timeout(None if budget is None else budget.left()):
                        await self._refresh()
            return None
        assert type(action) is Sleep
        await asyncio.sleep(_sleep_for(action.seconds, budget))
        return None

    async def _send(self, send: Send, budget: Budget | None) -> Outcome:
        raise NotImplementedError

    async def _locate(self, routes: tuple[str, ...], budget: Budget | None) -> list[Any]:
        raise NotImplementedError

    async def _refresh(self) -> None:
        raise NotImplementedError


class AsyncTransport(AsyncDriver):
    """Runs operations on an asyncio redis-py client (``Redis`` or ``RedisCluster``)."""

    def __init__(self, client: AsyncClient, policy: RetryPolicy) -> None:
        if isinstance(client, redis.asyncio.cluster.RedisCluster):
            self._cluster: redis.asyncio.cluster.RedisCluster | None = client
        elif isinstance(client, redis.asyncio.Redis):
            self._cluster = None
            self._pool = pool_of(client)
        else:
            raise ConfigError(f"expected an asyncio redis-py client, got {type(client).__name__}")
        self.client = client
        self.policy = policy
        self.one_node = self._cluster is None

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
        return await self._wire(step, first, budget)

    async def _locate(self, routes: tuple[str, ...], budget: Budget | None) -> list[Any]:
        failed = await self._initialized(budget)
        if failed is not None:
            return [failed for _ in routes]
        return [_locate(self._cluster, route) for route in routes]

    async def _refresh(self) -> None:
        if self._cluster is not None:
            await self._cluster.nodes_manager.initialize()
        else:  # a Sentinel's master may have moved
            await afollow_master(self._pool)

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
