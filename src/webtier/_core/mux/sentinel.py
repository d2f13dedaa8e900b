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
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from redis import exceptions as rx

from webtier._core.mux.dial import pack
from webtier._core.mux.link import Link, outcome_of
from webtier._core.mux.node import Node, drop
from webtier._core.mux.settings import Settings
from webtier._core.sentinel import SentinelTarget

_ASK_FAILURES = (OSError, rx.ConnectionError, rx.TimeoutError, TimeoutError)


class MasterFinder:
    """Asks the sentinels where the master of ``service`` is."""

    def __init__(self, target: SentinelTarget, settings: Settings) -> None:
        self.service = target.service
        self.sentinels = list(target.sentinels)
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

    async def master(self, loop: asyncio.AbstractEventLoop) -> tuple[str, int]:
        """The master's address, as the first sentinel that knows it says.
        Raises ``ConnectionError`` naming every sentinel's failure."""
        failures = []
        for index, address in enumerate(list(self.sentinels)):
            node = self._nodes.get(address)
            if node is None:
                node = self._nodes[address] = Node(self._settings.at(*address))
            try:
                async with asyncio.timeout(self._settings.connect_timeout):
                    link = await node.link(loop)
                    command = ("SENTINEL", "get-master-addr-by-name", self.service)
                    outcome = outcome_of(await link.send(pack([command]), 1).future)
            except _ASK_FAILURES as error:
                failures.append(f"{node.name}: {error or 'no answer'}")
                continue
            reply = outcome.error or outcome.replies[0]
            if isinstance(reply, BaseException):
                failures.append(f"{node.name}: {reply}")
                continue
            if not reply:
                failures.append(f"{node.name}: no master named {self.service!r}")
                continue
            # The one that answered is asked first next time.
            self.sentinels.insert(0, self.sentinels.pop(index))
            return reply[0].decode(), int(reply[1])
        raise rx.ConnectionError(
            f"no sentinel gave the master of {self.service!r}: {'; '.join(failures)}"
        )

    def close(self) -> None:
        for node in self._nodes.values():
            node.close()


class MasterNode(Node):
    """The connections to whichever server the sentinels name master."""

    def __init__(self, settings: Settings, finder: MasterFinder) -> None:
        super().__init__(settings)
        self.finder = finder
        self.name = f"the master of {finder.service!r}"
        self._locating: asyncio.Task[None] | None = None
        self._fresh = False  # just asked (a refresh): the next dial need not ask again

    async def _dial(self, index: int, loop: asyncio.AbstractEventLoop) -> Link:
        old = self.links[index]
        if old is not None and old.usable(loop):
            return old
        if not self._fresh:
            await self.relocate(loop)
        self._fresh = False
        return await super()._dial(index, loop)

    async def relocate(self, loop: asyncio.AbstractEventLoop) -> None:
        """Ask the sentinels where the master is; if it moved, retire the
        connections to the old one. Concurrent callers share one asking."""
        task = self._locating
        if task is None or task.done() or task.get_loop() is not loop:
            task = self._locating = loop.create_task(self._locate(loop))
            task.add_done_callback(_seen)
        await asyncio.shield(task)

    async def _locate(self, loop: asyncio.AbstractEventLoop) -> None:
        host, port = await self.finder.master(loop)
        self._fresh = True
        if (host, port) == (self.settings.host, self.settings.port):
            return
        self.settings = self.settings.at(host, port)
        for index, link in enumerate(self.links):
            if link is not None:
                self.links[index] = None
                _retire(link, loop)

    def close(self) -> None:
        super().close()
        self.finder.close()


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


def _seen(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
