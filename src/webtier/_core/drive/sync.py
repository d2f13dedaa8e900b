"""The sync executor: one call at a time per connection, kept idle in front
of redis-py's pool (:mod:`webtier._core.redispy`)."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence
from typing import Any

import redis
import redis.cluster

from webtier._core.actions import (
    Action,
    Batch,
    Locate,
    Outcome,
    Refresh,
    Send,
    Sleep,
)
from webtier._core.deadline import Budget, current_limit, publish, unpublish
from webtier._core.drive.shared import (
    _IO_ERRORS,
    _REPLY_ERRORS,
    _UNREACHABLE,
    SyncClient,
    T,
    _call,
    _late,
    _locate,
    _node,
    _out_of_time,
    _sleep_for,
    _throw,
    pool_of,
)
from webtier._core.protocol import Call, Command, Op, Reply, Step
from webtier._core.redispy import checkin, checkout, pack, reply_reader
from webtier._core.replicas import lag_tolerated
from webtier._core.sentinel import follow_master, replica_pool
from webtier._core.wire import NOT_DONE, exchange, flat, planned, settled
from webtier.config import RetryPolicy
from webtier.errors import ConfigError


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
            self._cluster = None
            self._pool = pool_of(client)
            self._replicas = replica_pool(self._pool)
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
            if self._replicas is not None and lag_tolerated(step):
                # Not answered cleanly there: the master, as if not tried.
                done = settled(step, _pipeline(self._replicas, flat(commands), budget), commands)
                if done is not NOT_DONE:
                    return done
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
            if budget is None or budget.left() > 0:
                # If the map (or the master) cannot be found now, the next
                # send fails and is retried within the budget.
                with contextlib.suppress(*_UNREACHABLE):
                    if self._cluster is not None:
                        self._cluster.nodes_manager.initialize()
                    else:  # a Sentinel's master may have moved
                        follow_master(self._pool)
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
