"""The executor on webtier's own client (:class:`MuxClient`): the wire's
actions carried out on multiplexed connections.

The same contract as the executor on redis-py's asyncio clients
(:mod:`webtier._core.drive.aio`), whose driver it shares: a send answers an
:class:`~webtier._core.actions.Outcome` (replies, error replies as values,
and whether a broken send may have reached the server), and every policy
about failures stays in :mod:`webtier._core.wire`. What differs is waiting:
a send does not hold a connection, it queues its commands on the node's
shared one and awaits its own future; a deadline expires that future alone
(:meth:`Link.expire`), so no task is cancelled and no connection closed
when one operation runs out of time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis import exceptions as rx

from webtier._core.actions import Address, Outcome, Send, TimeLimitReached
from webtier._core.deadline import Budget
from webtier._core.drive.aio import AsyncDriver, AsyncTransport
from webtier._core.drive.shared import AsyncClient, _late, _out_of_time
from webtier._core.mux.client import MuxClient
from webtier._core.mux.dial import pack
from webtier._core.mux.link import Link, outcome_of
from webtier._core.mux.node import Node
from webtier._core.mux.sentinel import MasterNode
from webtier._core.protocol import Command, Request, Step
from webtier._core.replicas import lag_tolerated
from webtier._core.wire import NOT_DONE, flat, planned, settled
from webtier.config import RetryPolicy

_NOT_REACHED = (OSError, rx.ConnectionError, rx.TimeoutError)


class MuxTransport(AsyncDriver):
    """Runs operations on a :class:`MuxClient`."""

    def __init__(self, client: MuxClient, policy: RetryPolicy) -> None:
        self.client = client
        self.policy = policy
        self.one_node = not client.cluster
        self._server = client.server
        self._replica = client.replica

    async def exchange(self, step: Step, budget: Budget | None = None) -> Any:
        first = None
        server = self._server
        if server is not None:
            # One server: the hot path needs no Locate and no generator.
            commands = planned(step)
            if not commands:
                return []
            if self._replica is not None and lag_tolerated(step):
                # Not answered cleanly there: the master, as if not tried.
                got = await _send(self._replica, flat(commands), budget)
                done = settled(step, outcome_of(got), commands)
                if done is not NOT_DONE:
                    return done
            got = await _send(server, flat(commands), budget)
            if type(got) is list and type(step) is Request:  # the hot path's common case
                for reply in got:
                    if isinstance(reply, BaseException):
                        break
                else:
                    return got
            first = outcome_of(got)
            done = settled(step, first, commands)
            if done is not NOT_DONE:
                return done
        return await self._wire(step, first, budget)

    async def _send(self, send: Send, budget: Budget | None) -> Outcome:
        target = send.target
        if type(target) is Node:
            node: Node | None = target
        elif self._server is not None:
            node = self._server
        else:
            failed = await self._mapped(budget)
            if failed is not None:
                return _late(Outcome([], failed, delivered=False), budget)
            if isinstance(target, Address):
                node = self.client.node_at(target.host, target.port)
            else:
                node = self.client.node_for(target)
        if node is None:
            missing = rx.ConnectionError(f"no master serves the slot of {target!r} now")
            return _late(Outcome([], missing, delivered=False), budget)
        return outcome_of(await _send(node, send.commands, budget))

    async def _locate(self, routes: tuple[str, ...], budget: Budget | None) -> list[Any]:
        if self._server is not None:
            return [("server", self._server) for _ in routes]
        failed = await self._mapped(budget)
        located: list[Any] = []
        for route in routes:
            node = None if failed is not None else self.client.node_for(route)
            if node is None:
                located.append(failed or rx.ConnectionError(f"no master serves {route!r} now"))
            else:
                located.append((node.name, node))
        return located

    async def _refresh(self) -> None:
        if self._server is None:
            await self.client.refresh()
        elif isinstance(self._server, MasterNode):  # READONLY, or a broken send
            await self._server.relocate(asyncio.get_running_loop())

    async def _mapped(self, budget: Budget | None) -> BaseException | None:
        """Reads the slot map if the client has none yet; the error if it
        cannot (a ConfigError, a seed not in cluster mode, is raised)."""
        if self.client.slots is not None:
            return None
        try:
            async with asyncio.timeout(None if budget is None else max(budget.left(), 0)):
                await self.client.slot_map()
        except TimeoutError:
            return TimeLimitReached("no node answered within the time limit")
        except _NOT_REACHED as error:
            return error
        return None


async def _send(
    node: Node, commands: tuple[Command, ...], budget: Budget | None
) -> list[Any] | Outcome:
    """Queue ``commands`` on ``node``'s connection and await their replies
    (a list), or what broke (an Outcome), no later than the deadline."""
    loop = asyncio.get_running_loop()
    packed = pack(commands)
    link = node.ready(loop)
    if link is None or not link.has_room(len(packed)):
        if budget is not None and budget.left() <= 0:
            return _out_of_time()
        try:
            link = await _link(node, loop, len(packed), budget)
        except TimeoutError:
            return _out_of_time()
        except _NOT_REACHED as error:
            return _late(Outcome([], error, delivered=False), budget)
    pending = link.send(packed, len(commands))
    if budget is None:
        return await pending.future
    left = budget.left()
    if left <= 0:
        link.expire(pending)
        return await pending.future
    timer = loop.call_later(left, link.expire, pending)
    try:
        got = await pending.future
    finally:
        timer.cancel()
    return got if type(got) is list else _late(got, budget)  # type: ignore[arg-type]


async def _link(
    node: Node, loop: asyncio.AbstractEventLoop, size: int, budget: Budget | None
) -> Link:
    """A connection with room for ``size`` more bytes: opened, or waited
    for (a burst queues here, so memory stays bounded), within the budget."""
    async with asyncio.timeout(None if budget is None else budget.left()):
        while True:
            link = await node.link(loop)
            if link.has_room(size):
                return link
            await link.wait_for_room(size)
            if link.closed is None:
                return link


AnyAsyncClient = MuxClient | AsyncClient


def async_transport(client: AnyAsyncClient, policy: RetryPolicy) -> MuxTransport | AsyncTransport:
    """The executor for ``client``: webtier's own, or redis-py's asyncio one."""
    if isinstance(client, MuxClient):
        return MuxTransport(client, policy)
    return AsyncTransport(client, policy)
