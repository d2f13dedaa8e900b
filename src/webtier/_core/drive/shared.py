"""What the sync and asyncio executors share: the failures they tell apart,
the carrying out of a Call, time-limit bookkeeping."""

from __future__ import annotations

import asyncio
import time
from typing import Any, TypeVar

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis import exceptions as rx

from webtier._core.actions import (
    Address,
    Outcome,
    TimeLimitReached,
)
from webtier._core.deadline import Budget
from webtier._core.protocol import Call, Op, Step
from webtier._core.redis_errors import as_webtier_error
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


def pool_of(client: Any) -> Any:
    """The connection pool of a single-server client (sync or asyncio). A
    client pinned to one connection is refused: webtier's calls, from any
    thread or task, would share that connection."""
    if client.connection is not None:
        raise ConfigError(
            "single_connection_client clients are not supported; pass a pooled client"
        )
    return client.connection_pool
