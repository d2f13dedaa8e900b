"""The master of a Sentinel deployment, for webtier's own client: found
through the sentinels, and found again when it may have changed.

The sentinels are asked (``SENTINEL get-master-addr-by-name``), in turn,
the last one that answered first, before each new connection to the master
(so a failed connect, or a connection the failover closed, asks again), and
when the wire refreshes after a ``READONLY`` reply (the old master, now a
replica) or a broken send. A connection to a master that is no longer one
is retired, not cut: the commands already on it get their replies (a
``READONLY`` refusal, sent again to the new master by the wire's rules),
then it closes.

And the sentinels are listened to: once a connection to the master is
open, a task keeps a sentinel subscribed to ``+switch-master`` (each
announces there the new master of a failover it learnt of) and
``+promoted-slave`` (the sentinel leading a failover announces there the
replica it promoted, before it reconfigures the others). An announcement
for our service moves the client to the new master at once: no command has
to fail on the old one first, and in a planned failover (``SENTINEL
FAILOVER``, the old master alive until the sentinels make it a replica,
about 10 s later) the client stops writing to the old master, where every
write acknowledged after the promotion is lost. When that sentinel stops
answering (no reply to a PING after 5 s quiet, or a closed connection) the
task subscribes to the next, with a pause, and asks the sentinels where the
master is (an announcement may have been missed meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

import hiredis
from redis import exceptions as rx

from webtier._core.mux.dial import pack
from webtier._core.mux.link import Link, outcome_of
from webtier._core.mux.node import Node, drop
from webtier._core.mux.settings import Settings
from webtier._core.sentinel import SentinelTarget

_ASK_FAILURES = (OSError, rx.ConnectionError, rx.TimeoutError, TimeoutError)
# The channels announcing a new master: a sentinel's own failover (the
# replica it promoted) and every failover it learnt of (the new master).
ANNOUNCEMENTS = (b"+promoted-slave", b"+switch-master")
_LISTEN_FAILURES = (*_ASK_FAILURES, rx.RedisError, hiredis.ProtocolError, EOFError)
_QUIET = 5.0  # seconds without a message before a PING checks the sentinel is there
_PAUSES = (0.05, 0.1, 0.2, 0.5, 1.0)  # before subscribing again, after each failure in a row


class MasterFinder:
    """Asks the sentinels where the master of ``service`` is."""

    def __init__(self, target: SentinelTarget, settings: Settings) -> None:
        self.service = target.service
        self.sentinels = list(target.sentinels)
        self.replica_reads = target.replica_reads
        # The sentinels' connections: the master's settings (timeouts, TLS),
        # the sentinels' own credentials, database 0.
        self._settings = dataclasses.replace(
            settings,
            username=target.username,
            password=target.password,
            db=0,
            protocol=2,
            client_name=None,
            connections=1,
        )
        self._nodes: dict[tuple[str, int], Node] = {}
        self._failures = 0  # subscriptions to the sentinels failed in a row (see listen)

    async def master(self, loop: asyncio.AbstractEventLoop) -> tuple[str, int]:
        """The master's address, as the first sentinel that knows it says.
        Raises ``ConnectionError`` naming every sentinel's failure."""
        reply = await self._ask(loop, "master", "get-master-addr-by-name")
        return reply[0].decode(), int(reply[1])

    async def replicas(self, loop: asyncio.AbstractEventLoop) -> list[tuple[str, int]]:
        """The addresses of the master's replicas the first sentinel that
        knows the service deems up (maybe none), as redis-py's Sentinel has
        them: not down. ("disconnected", the sentinel's own link to one
        being down, marks a restarted replica for a while after it is up.)
        Raises ``ConnectionError`` naming every sentinel's failure."""
        reply = await self._ask(loop, "replicas", "replicas")
        found = []
        for fields in reply:
            state = dict(zip(fields[::2], fields[1::2], strict=True))
            flags = state.get(b"flags", b"").split(b",")
            if not {b"s_down", b"o_down"} & set(flags):
                found.append((state[b"ip"].decode(), int(state[b"port"])))
        return found

    async def _ask(self, loop: asyncio.AbstractEventLoop, what: str, subcommand: str) -> Any:
        """The reply of the first sentinel that answers ``SENTINEL
        <subcommand> <service>`` (an empty one only for the replicas)."""
        command = ("SENTINEL", subcommand, self.service)
        failures = []
        for index, address in enumerate(list(self.sentinels)):
            node = self._nodes.get(address)
            if node is None:
                node = self._nodes[address] = Node(self._settings.at(*address))
            try:
                async with asyncio.timeout(self._settings.connect_timeout):
                    link = await node.link(loop)
                    outcome = outcome_of(await link.send(pack([command]), 1).future)
            except _ASK_FAILURES as error:
                failures.append(f"{node.name}: {error or 'no answer'}")
                continue
            reply = outcome.error or outcome.replies[0]
            if isinstance(reply, BaseException):
                failures.append(f"{node.name}: {reply}")
                continue
            if not reply and what == "master":
                failures.append(f"{node.name}: no master named {self.service!r}")
                continue
            # The one that answered is asked first next time.
            self.sentinels.insert(0, self.sentinels.pop(index))
            return reply
        raise rx.ConnectionError(
            f"no sentinel gave the {what} of {self.service!r}: {'; '.join(failures)}"
        )

    def close(self) -> None:
        for node in self._nodes.values():
            node.close()

    async def listen(self, heard: Any) -> None:
        """Forever: keep a sentinel subscribed to the announcements of a new
        master, calling ``heard((host, port))`` for each about our service,
        and ``heard(None)`` after subscribing anew (an announcement may have
        been missed meanwhile). A sentinel that fails is left for the next.

        One sentinel, not all: each announces every failover it learns of,
        and listening to all three (tried) moved the client no sooner in a
        planned failover, for three connections a client instead of one."""
        self._failures = 0
        while True:
            for address in list(self.sentinels):
                with contextlib.suppress(*_LISTEN_FAILURES):
                    await self._subscribed(address, heard)
                self._failures += 1
                await asyncio.sleep(_PAUSES[min(self._failures, len(_PAUSES)) - 1])

    async def _subscribed(self, address: tuple[str, int], heard: Any) -> None:
        """Subscribed to the announcements on the sentinel at ``address``
        until it fails (raising why)."""
        settings = self._settings.at(*address)
        async with asyncio.timeout(settings.connect_timeout):
            if settings.tls is None:
                reader, writer = await asyncio.open_connection(*address)
            else:
                reader, writer = await asyncio.open_connection(
                    *address,
                    ssl=settings.tls,
                    server_hostname=settings.host if settings.check_hostname else None,
                )
        try:
            parser = hiredis.Reader()
            greeting = [c for c in settings.greeting() if c[0] != "PING"]
            writer.write(pack([*greeting, ("SUBSCRIBE", *ANNOUNCEMENTS)]))
            async with asyncio.timeout(settings.connect_timeout):
                for _ in range(len(greeting) + len(ANNOUNCEMENTS)):
                    reply = await _reply(reader, parser)
                    if isinstance(reply, BaseException):
                        raise rx.ConnectionError(f"{settings.name}: {reply}")
            if self._failures:
                heard(None)
            self._failures = 0
            pinged = False
            while True:
                try:
                    async with asyncio.timeout(_QUIET):
                        message = await _reply(reader, parser)
                except TimeoutError:
                    if pinged:  # no answer to the PING either: that sentinel is gone
                        raise
                    writer.write(pack([("PING",)]))
                    pinged = True
                    continue
                pinged = False
                found = _announced(message, self.service)
                if found is not None:
                    heard(found)
        finally:
            writer.close()


async def _reply(reader: asyncio.StreamReader, parser: Any) -> Any:
    reply = parser.gets()
    while reply is False:
        data = await reader.read(65536)
        if not data:
            raise EOFError("the sentinel closed the connection")
        parser.feed(data)
        reply = parser.gets()
    return reply


def _announced(message: Any, service: str) -> tuple[str, int] | None:
    """The new master's address in a message on one of the
    :data:`ANNOUNCEMENTS` about ``service``, else None. The messages:
    ``+switch-master``: ``<service> <old ip> <old port> <new ip> <new port>``;
    ``+promoted-slave``: ``slave <ip>:<port> <ip> <port> @ <service> <ip> <port>``."""
    if not isinstance(message, list) or len(message) != 3 or message[0] != b"message":
        return None
    words = message[2].decode(errors="replace").split()
    if message[1] == b"+switch-master" and len(words) == 5 and words[0] == service:
        return words[3], int(words[4])
    if message[1] == b"+promoted-slave" and len(words) == 8 and words[5] == service:
        return words[2], int(words[3])
    return None


class MasterNode(Node):
    """The connections to whichever server the sentinels name master."""

    def __init__(self, settings: Settings, finder: MasterFinder) -> None:
        super().__init__(settings)
        self.finder = finder
        self.name = f"the master of {finder.service!r}"
        self._locating: asyncio.Task[None] | None = None
        self._fresh = False  # just asked (a refresh): the next dial need not ask again
        # The sentinels' announcements followed (see the module's words):
        # off only to measure what they save.
        self.listening = True
        self._listener: asyncio.Task[None] | None = None

    async def _dial(self, index: int, loop: asyncio.AbstractEventLoop) -> Link:
        old = self.links[index]
        if old is not None and old.usable(loop):
            return old
        if not self._fresh:
            await self.relocate(loop)
        self._fresh = False
        link = await super()._dial(index, loop)
        self._listen(loop)
        return link

    def _listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """The task following the sentinels' announcements, in ``loop``."""
        task = self._listener
        if not self.listening or (task is not None and not task.done() and task.get_loop() is loop):
            return
        if task is not None and not task.done() and task.get_loop().is_running():
            task.get_loop().call_soon_threadsafe(task.cancel)

        def heard(address: tuple[str, int] | None) -> None:
            if address is None:
                loop.create_task(self.relocate(loop)).add_done_callback(_seen)
            else:
                self._moved(address, loop)

        self._listener = loop.create_task(self.finder.listen(heard))
        self._listener.add_done_callback(_seen)

    async def relocate(self, loop: asyncio.AbstractEventLoop) -> None:
        """Ask the sentinels where the master is; if it moved, retire the
        connections to the old one. Concurrent callers share one asking."""
        task = self._locating
        if task is None or task.done() or task.get_loop() is not loop:
            task = self._locating = loop.create_task(self._locate(loop))
            task.add_done_callback(_seen)
        await asyncio.shield(task)

    async def _locate(self, loop: asyncio.AbstractEventLoop) -> None:
        address = await self.finder.master(loop)
        self._fresh = True
        self._moved(address, loop)

    def _moved(self, address: tuple[str, int], loop: asyncio.AbstractEventLoop) -> None:
        """The master is at ``address``: if it moved, the connections to the
        old one are retired, and new ones go to ``address``."""
        if address == (self.settings.host, self.settings.port):
            return
        self.settings = self.settings.at(*address)
        for index, link in enumerate(self.links):
            if link is not None:
                self.links[index] = None
                _retire(link, loop)

    def close(self) -> None:
        super().close()
        self.finder.close()
        task, self._listener = self._listener, None
        if task is not None and not task.done():
            if task.get_loop() is _running():
                task.cancel()
            elif task.get_loop().is_running():
                task.get_loop().call_soon_threadsafe(task.cancel)


class ReplicaNode(Node):
    """The connections to one of the master's replicas, for the reads that
    tolerate lag (:mod:`webtier._core.replicas`). A new connection asks the
    sentinels which replicas are up and takes the first that accepts it;
    none does: ``ConnectionError``, and the read goes to the master."""

    def __init__(self, settings: Settings, finder: MasterFinder) -> None:
        super().__init__(settings)
        self.finder = finder
        self.name = f"a replica of {finder.service!r}"

    async def _dial(self, index: int, loop: asyncio.AbstractEventLoop) -> Link:
        old = self.links[index]
        if old is not None and old.usable(loop):
            return old
        failures = []
        for address in await self.finder.replicas(loop):
            self.settings = self.settings.at(*address)
            try:
                return await super()._dial(index, loop)
            except Exception as error:  # whatever it is, the master serves the read
                failures.append(f"{self.settings.name}: {error}")
        raise rx.ConnectionError(
            f"no replica of {self.finder.service!r} answered: {'; '.join(failures) or 'none up'}"
        )


def _retire(link: Link, loop: asyncio.AbstractEventLoop) -> None:
    """No new command goes on ``link``; it closes once those on it are answered."""
    if link.loop is not loop:
        drop(link, loop)
        return
    futures = [pending.future for pending in (*link.waiting, *link.queued)]
    if not futures:
        link.close()
        return
    waiting = asyncio.gather(*futures)
    waiting.add_done_callback(lambda _: link.close())


def _running() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _seen(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
