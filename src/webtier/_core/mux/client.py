"""webtier's own asyncio Redis client: one multiplexed connection per node.

:func:`webtier.connect_async` returns one (``client="redis-py"`` returns a
redis-py client instead). It is what :class:`webtier.AsyncWebTier` runs its
operations on; for commands of your own it has :meth:`MuxClient.execute`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis import exceptions as rx

from webtier._core.mux.dial import open_link, pack
from webtier._core.mux.link import Link, outcome_of
from webtier._core.mux.node import Node, drop
from webtier._core.mux.sentinel import MasterFinder, MasterNode, ReplicaNode
from webtier._core.mux.settings import Settings
from webtier._core.mux.slots import SlotMap
from webtier._core.protocol import Arg, Command, Reply
from webtier._core.redis_errors import as_webtier_error
from webtier.errors import ConfigError, InvalidInput, ServerError

_NOT_CLUSTER = "cluster support disabled"  # CLUSTER SLOTS on a server not in cluster mode

# Commands that would take the shared connection from every other task:
# they block it (a blocking pop, WAIT), change its state for every command
# after them (a transaction, a database, a protocol, credentials), or turn
# it into something else (pub/sub, MONITOR). Use redis-py's client for them.
_NOT_SHARED = frozenset(
    b"""BLPOP BRPOP BRPOPLPUSH BLMOVE BLMPOP BZPOPMIN BZPOPMAX BZMPOP WAIT WAITAOF
    MULTI EXEC DISCARD WATCH UNWATCH SELECT SWAPDB AUTH HELLO RESET QUIT
    SUBSCRIBE PSUBSCRIBE SSUBSCRIBE UNSUBSCRIBE PUNSUBSCRIBE SUNSUBSCRIBE MONITOR
    SYNC PSYNC REPLICAOF SLAVEOF READONLY READWRITE ASKING""".split()
)
_BLOCKING_READS = frozenset({b"XREAD", b"XREADGROUP"})  # with BLOCK
_SUBCOMMANDED = _BLOCKING_READS | {b"CLIENT"}  # whose arguments are looked at


class MuxClient:
    """An asyncio client of one Redis server or one Redis Cluster whose
    commands, from every task of the event loop, share one connection per
    node: the commands issued in one loop iteration go out in one write.

    Use it in one event loop at a time (a new loop gets new connections).
    It is safe across ``fork()``: a child never writes on its parent's
    connections. Close it with :meth:`aclose`.
    """

    def __init__(
        self,
        settings: Settings,
        seeds: tuple[tuple[str, int], ...] = (),
        finder: MasterFinder | None = None,
    ) -> None:
        self.settings = settings
        self.cluster = bool(seeds)
        self._seeds = seeds
        self.server: Node | None = None
        # A replica, for the reads that tolerate lag, if the URL asked.
        self.replica: Node | None = None
        if finder is not None:  # Sentinel: the master is wherever the sentinels say
            self.server = MasterNode(settings, finder)
            if finder.replica_reads:
                self.replica = ReplicaNode(settings, finder)
        elif not self.cluster:
            self.server = Node(settings)
        self._nodes: dict[str, Node] = {}
        self.slots: SlotMap | None = None
        self._loading: asyncio.Task[SlotMap] | None = None
        self._waiting: Link | None = None  # replicated()'s own connection, between calls

    def __repr__(self) -> str:
        kind = "cluster" if self.cluster else "server"
        where = ",".join(f"{h}:{p}" for h, p in self._seeds) or self.settings.name
        if isinstance(self.server, MasterNode):
            kind, where = "sentinel", self.server.name
        return f"<MuxClient {kind} {where}>"

    # -- nodes -------------------------------------------------------------------------

    def node_at(self, host: str, port: int) -> Node:
        """The node at ``host:port`` (a cluster's; made on first use)."""
        name = f"{host}:{port}"
        node = self._nodes.get(name)
        if node is None:
            node = self._nodes[name] = Node(self.settings.at(host, port))
        return node

    def node_for(self, route: str) -> Node | None:
        """The master serving ``route`` in the slot map as last read."""
        if self.server is not None:
            return self.server
        slots = self.slots
        owner = None if slots is None else slots.owner(route)
        return None if owner is None else self._nodes.get(owner)

    async def slot_map(self) -> SlotMap:
        """The cluster's slot map, read on first use."""
        if self.slots is not None:
            return self.slots
        return await self.refresh()

    async def refresh(self) -> SlotMap:
        """Read the slot map again; concurrent callers share one reading."""
        loop = asyncio.get_running_loop()
        task = self._loading
        if task is None or task.done() or task.get_loop() is not loop:
            task = self._loading = loop.create_task(self._read_map(loop))
            task.add_done_callback(_seen)
        return await asyncio.shield(task)

    async def _read_map(self, loop: asyncio.AbstractEventLoop) -> SlotMap:
        known = [] if self.slots is None else self.slots.nodes
        candidates = list(dict.fromkeys([*known, *self._seeds]))
        failure: BaseException | None = None
        for host, port in candidates:
            node = self.node_at(host, port)
            try:
                link = await node.link(loop)
                outcome = outcome_of(await link.send(pack([("CLUSTER", "SLOTS")]), 1).future)
            except (OSError, rx.ConnectionError, rx.TimeoutError) as error:
                failure = error
                continue
            if outcome.error is not None:
                failure = outcome.error
                continue
            reply = outcome.replies[0]
            if isinstance(reply, BaseException):
                if _NOT_CLUSTER in str(reply):
                    raise ConfigError(
                        f"not a Redis Cluster: use a redis:// URL ({node.name}: {reply})"
                    )
                failure = reply
                continue
            slots = SlotMap.parse(reply, (host, port))
            if slots.masters:
                self._adopt(slots)
                return slots
            failure = rx.ConnectionError(f"{node.name} serves no slots yet")
        raise rx.ConnectionError(f"no node of the cluster gave its slot map: {failure}")

    def _adopt(self, slots: SlotMap) -> None:
        for host, port in slots.nodes:
            self.node_at(host, port)
        named = {f"{h}:{p}" for h, p in slots.nodes} | {f"{h}:{p}" for h, p in self._seeds}
        for name in [n for n in self._nodes if n not in named]:
            self._nodes.pop(name).close()  # left the cluster
        self.slots = slots

    # -- commands of your own ----------------------------------------------------------

    async def execute(self, *command: Arg, route: str | None = None) -> Reply:
        """Send one command and return its reply, undecoded (``bytes`` for
        strings). On a cluster, ``route`` (a key of the command) picks the
        node. An error reply raises :class:`~webtier.errors.ServerError`, a
        failure to reach Redis :class:`~webtier.errors.RedisUnavailable`;
        nothing is sent twice. webtier's operations do not go through here:
        they retry by their own rules."""
        _check_shareable(command)
        try:
            if self.server is not None:
                node = self.server
            else:
                if route is None:
                    raise ConfigError("a command on a Redis Cluster needs route= (one of its keys)")
                await self.slot_map()
                found = self.node_for(route)
                if found is None:
                    raise rx.ConnectionError(f"no master serves the slot of {route!r} now")
                node = found
            link = await node.link(asyncio.get_running_loop())
            packed = pack([command])
            await link.wait_for_room(len(packed))
            outcome = outcome_of(await link.send(packed, 1).future)
        except (OSError, rx.RedisError) as error:
            raise as_webtier_error(error) from error
        if outcome.error is not None:
            raise as_webtier_error(outcome.error) from outcome.error
        reply = outcome.replies[0]
        if isinstance(reply, BaseException):
            raise ServerError(f"Redis refused {command[0]!r}: {reply}") from reply
        return reply

    async def replicated(self, replicas: int = 1, timeout: float = 0.1) -> int:
        """Wait until ``replicas`` replicas hold every write this client was
        answered before the call, or ``timeout`` seconds; return how many
        did. Fewer than asked: those writes are applied on the master but
        may not survive a failover (Redis replicates asynchronously).

        ``WAIT`` blocks the connection it runs on, so it runs on one of its
        own (made for the call), after a write of that connection (a
        ``PUBLISH``, which touches no key) that every earlier write precedes
        in the replication stream: once a replica has it, it has them. That
        connection is kept between calls (one; calls at once make more). One
        server or a Sentinel's master; not a Redis Cluster (each master
        replicates its own slots)."""
        if self.server is None:
            raise ConfigError("replicated() waits on one master: not on a Redis Cluster")
        if not (isinstance(replicas, int) and replicas >= 1):
            raise InvalidInput("replicas", "must be an int >= 1", replicas)
        if not 0 < timeout <= 60:
            raise InvalidInput("timeout", "must be over 0 and at most 60 s", timeout)
        loop = asyncio.get_running_loop()
        commands: list[Command] = [
            ("PUBLISH", "webtier:replicated", ""),
            ("WAIT", replicas, int(timeout * 1000)),
        ]
        try:
            await self.server.link(loop)  # the master located (a Sentinel's), as writes find it
            link, self._waiting = self._waiting, None
            at = self.server.settings
            if link is None or not link.usable(loop) or link.name != at.name:
                if link is not None:
                    drop(link, loop)
                link = await open_link(at, loop)
        except (OSError, rx.RedisError) as error:
            raise as_webtier_error(error) from error
        try:
            outcome = outcome_of(await link.send(pack(commands), 2).future)
        except asyncio.CancelledError:  # a caller's time limit: this call alone holds the link
            drop(link, loop)
            raise
        # Kept for the next call (one at a time; a call meanwhile made its own).
        if outcome.error is None and self._waiting is None:
            self._waiting = link
        else:
            drop(link, loop)
        if outcome.error is not None:
            raise as_webtier_error(outcome.error) from outcome.error
        confirmed = outcome.replies[1]
        if isinstance(confirmed, BaseException):
            raise ServerError(f"Redis refused WAIT: {confirmed}") from confirmed
        return int(confirmed)

    async def aclose(self) -> None:
        """Close every connection; commands still waiting fail as if the
        server had closed them."""
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
        for node in [self.server, self.replica, *self._nodes.values()]:
            if node is not None:
                node.close()
        if self._waiting is not None:
            drop(self._waiting, asyncio.get_running_loop())
            self._waiting = None
        await asyncio.sleep(0)  # let the transports run their close


def _word(arg: Arg) -> bytes:
    return (arg if isinstance(arg, bytes) else str(arg).encode()).upper()


def _check_shareable(command: tuple[Arg, ...]) -> None:
    if not command:
        raise InvalidInput("command", "is empty", command)
    name = _word(command[0])
    words = [_word(arg) for arg in command[1:]] if name in _SUBCOMMANDED else []
    if (
        name in _NOT_SHARED
        or (name in _BLOCKING_READS and b"BLOCK" in words)
        or (name == b"CLIENT" and words[:1] in ([b"REPLY"], [b"PAUSE"], [b"TRACKING"]))
    ):
        raise InvalidInput(
            "command",
            "it would block or change the connection every task shares; "
            "use connect_async(url, client='redis-py') for it",
            command[0],
        )


def _seen(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
