"""The master of a Sentinel deployment, for webtier's own client: found
through the sentinels, and found again when it may have changed.

The sentinels are asked (``SENTINEL get-master-addr-by-name``), in turn,
the last one whose answer proved true first, before each new connection to
the master (so a failed connect, or a connection the failover closed, asks
again), and when the wire refreshes after a ``READONLY`` reply (the old
master, now a replica) or a broken send. An answer proves true when the
server it names says it is a master (its role in a ``HELLO`` reply, on the
connection's greeting: no round trip more): a sentinel that has not yet
heard of a failover names the old master, a replica by now, and taking its
word sent every write there to be refused (``READONLY``), the sentinels
asked again, the same one answering first, until it heard; such an answer
is passed over for the next sentinel's, as redis.io's guidelines for
Sentinel clients ask. A connection to a master that is no longer one
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
from collections.abc import AsyncGenerator
from typing import Any

import hiredis
from redis import exceptions as rx

from webtier._core.mux.dial import check_master, open_link, pack
from webtier._core.mux.link import Link, outcome_of
from webtier._core.mux.node import Node, drop, retire, running_loop, seen
from webtier._core.mux.settings import Settings
from webtier._core.sentinel import SentinelTarget

_ASK_FAILURES = (OSError, rx.ConnectionError, rx.TimeoutError, TimeoutError)
# The channels announcing a new master: a sentinel's own failover (the
# replica it promoted) and every failover it learnt of (the new master).
ANNOUNCEMENTS = (b"+promoted-slave", b"+switch-master")
_LISTEN_FAILURES = (*_ASK_FAILURES, rx.RedisError, hiredis.ProtocolError, EOFError)
# Why a server a sentinel named is passed over for the next one's answer:
# not a master (NotMaster, a ConnectionError), or not reached. A refusal of
# the credentials or of the database is raised as it is: every server of
# the service would say the same.
_NOT_THERE = (OSError, rx.TimeoutError, TimeoutError, rx.ConnectionError)
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

    async def masters(
        self, loop: asyncio.AbstractEventLoop, failures: list[str]
    ) -> AsyncGenerator[tuple[tuple[str, int], tuple[str, int]]]:
        """Each sentinel's answer in turn, the next one asked only once the
        one before is found wanting: (the sentinel, the master it names).
        Why a sentinel named none is appended to ``failures``. Call
        :meth:`trust` with the sentinel whose answer proved true."""
        replies = self._replies(loop, "get-master-addr-by-name", failures)
        async with contextlib.aclosing(replies):
            async for sentinel, reply in replies:
                if reply:
                    yield sentinel, (reply[0].decode(), int(reply[1]))
                else:
                    failures.append(f"{_named(sentinel)}: no master named {self.service!r}")

    def trust(self, sentinel: tuple[str, int]) -> None:
        """The sentinel whose answer proved true is asked first next time
        (and listened to, from the next subscription): one behind a
        failover, whose answer did not, stays where it was."""
        if sentinel in self.sentinels:
            self.sentinels.remove(sentinel)
            self.sentinels.insert(0, sentinel)

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
        <subcommand> <service>``."""
        failures: list[str] = []
        async with contextlib.aclosing(self._replies(loop, subcommand, failures)) as replies:
            async for sentinel, reply in replies:
                self.trust(sentinel)
                return reply
        raise rx.ConnectionError(self.none_gave(what, failures))

    def none_gave(self, what: str, failures: list[str]) -> str:
        return f"no sentinel gave the {what} of {self.service!r}: {'; '.join(failures)}"

    async def _replies(
        self, loop: asyncio.AbstractEventLoop, subcommand: str, failures: list[str]
    ) -> AsyncGenerator[tuple[tuple[str, int], Any]]:
        """Each sentinel's reply to ``SENTINEL <subcommand> <service>`` in
        turn, as the caller asks for the next; a sentinel that fails is
        skipped, why appended to ``failures``."""
        command = ("SENTINEL", subcommand, self.service)
        for address in list(self.sentinels):
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
            yield address, reply

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
            # Aborted: a subscription has nothing to flush, and over TLS a
            # close waits for the sentinel's close_notify; an event loop
            # that ended first (the client closed, then the loop) left the
            # socket under the TLS open, to be collected unclosed.
            writer.transport.abort()


async def _reply(reader: asyncio.StreamReader, parser: Any) -> Any:
    reply = parser.gets()
    while reply is False:
        data = await reader.read(65536)
        if not data:
            raise EOFError("the sentinel closed the connection")
        parser.feed(data)
        reply = parser.gets()
    return reply


def _named(address: tuple[str, int]) -> str:
    return f"{address[0]}:{address[1]}"


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
    """The connections to whichever server the sentinels name master, once
    it says it is one: a sentinel that has not yet heard of a failover
    names the old master, maybe a replica by now (answering ``READONLY``);
    its answer is set aside for the next sentinel's. The check rides on
    each new connection's greeting (a ``HELLO`` and its ``role``: no round
    trip more), and on the connection already open when the sentinels are
    asked again about the server it reaches."""

    def __init__(self, settings: Settings, finder: MasterFinder) -> None:
        super().__init__(dataclasses.replace(settings, master_only=True))
        self.finder = finder
        self.name = f"the master of {finder.service!r}"
        self._locating: asyncio.Task[None] | None = None
        self._fresh = False  # just located (asked, or announced): the next dial need not ask
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
        located = self.links[index]  # the connection the locating opened, if here
        link = located if located is not None and located.usable(loop) else None
        if link is None:
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
                loop.create_task(self.relocate(loop)).add_done_callback(seen)
            else:
                self._moved(address, loop)
                # Newer than what a sentinel may answer (the others hear of
                # the failover after its leader announces it): the next
                # connection goes there, its greeting checking it is master.
                self._fresh = True

        self._listener = loop.create_task(self.finder.listen(heard))
        self._listener.add_done_callback(seen)

    async def relocate(self, loop: asyncio.AbstractEventLoop) -> None:
        """Ask the sentinels where the master is, until one names a server
        that says it is; if it moved, retire the connections to the old
        one. Concurrent callers share one locating."""
        task = self._locating
        if task is None or task.done() or task.get_loop() is not loop:
            task = self._locating = loop.create_task(self._locate(loop))
            task.add_done_callback(seen)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and (current is None or not current.cancelling()):
                # close() stopped the locating; the caller was not cancelled:
                # its call fails as on a connection the client closed.
                raise rx.ConnectionError(f"{self.settings.name}: the client was closed") from None
            raise

    async def _locate(self, loop: asyncio.AbstractEventLoop) -> None:
        failures: list[str] = []
        tried: set[tuple[str, int]] = set()
        async with contextlib.aclosing(self.finder.masters(loop, failures)) as answers:
            async for sentinel, address in answers:
                if address in tried:  # already found wanting in this round
                    failures.append(f"{_named(sentinel)}: names {_named(address)} too")
                    continue
                tried.add(address)
                try:
                    opened = await self._checked(address, loop)
                except (rx.AuthenticationError, rx.AuthorizationError):
                    raise
                except _NOT_THERE as error:
                    failures.append(f"{_named(sentinel)}: names {_named(address)}: {error}")
                    continue
                self.finder.trust(sentinel)
                self._moved(address, loop)
                if opened is not None:
                    self._keep(opened, loop)
                self._fresh = True
                return
        raise rx.ConnectionError(self.finder.none_gave("master", failures))

    async def _checked(
        self, address: tuple[str, int], loop: asyncio.AbstractEventLoop
    ) -> Link | None:
        """Proof that the server at ``address`` is a master: a new
        connection to it, greeted as one (returned), or, if one is open
        already, its answer to the role check on it (None returned).
        Raises :class:`NotMaster`, or why it could not be reached."""
        if address == (self.settings.host, self.settings.port):
            link = self.ready(loop)
            if link is not None:
                outcome = outcome_of(await link.send(pack([self.settings.role_check()]), 1).future)
                reply = outcome.error or outcome.replies[0]
                if isinstance(reply, BaseException):
                    raise rx.ConnectionError(f"{self.settings.name}: {reply}")
                check_master(reply, self.settings.name)
                return None
        return await open_link(self.settings.at(*address), loop)

    def _keep(self, link: Link, loop: asyncio.AbstractEventLoop) -> None:
        """``link``, to the master just located, takes a free place (closed
        if none is: every other one is open to it already)."""
        for index, old in enumerate(self.links):
            if old is None or not old.usable(loop):
                if old is not None:
                    drop(old, loop)
                self.links[index] = link
                return
        link.close()

    def _moved(self, address: tuple[str, int], loop: asyncio.AbstractEventLoop) -> None:
        """The master is at ``address``: if it moved, the connections to the
        old one are retired, and new ones go to ``address``."""
        if address == (self.settings.host, self.settings.port):
            return
        self.settings = self.settings.at(*address)
        for index, link in enumerate(self.links):
            if link is not None:
                self.links[index] = None
                retire(link, loop)

    def close(self) -> None:
        super().close()
        self.finder.close()
        # A locating under way would keep the connection it proves the
        # master on after the close, open until collected: stopped too.
        for task in (self._listener, self._locating):
            if task is not None and not task.done():
                if task.get_loop() is running_loop():
                    task.cancel()
                elif task.get_loop().is_running():
                    task.get_loop().call_soon_threadsafe(task.cancel)
        self._listener = self._locating = None


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
