"""The connections to one Redis server: one by default, a few if asked.

A connection is made on demand, by one attempt that every task wanting it
shares (a task cancelled meanwhile does not cancel it). A connection that
broke, was made in another event loop, or was made before a ``fork()``
(its socket is shared with the parent) is never written on again: the next
send opens a new one. How often to try again after a failure is the wire's
policy (:mod:`webtier._core.wire`), which backs off between tries.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from webtier._core.mux.dial import open_link
from webtier._core.mux.link import Link, generation
from webtier._core.mux.settings import Settings
from webtier.errors import ConfigError

# Connections made before a fork, kept referenced and untouched in the
# child: closing them could disturb nothing (the parent holds the same
# sockets), but going through their event loop might, and letting them be
# collected would warn about unclosed sockets.
_INHERITED: list[Link] = []


class Node:
    """One server's connections, in the event loop that uses them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.name = settings.name
        self.links: list[Link | None] = [None] * settings.connections
        self._dialing: list[asyncio.Task[Link] | None] = [None] * settings.connections
        self._turn = 0

    def ready(self, loop: asyncio.AbstractEventLoop) -> Link | None:
        """A connection to write on now, without waiting, or None."""
        links = self.links
        if len(links) == 1:
            link = links[0]
            return link if link is not None and link.usable(loop) else None
        # Several: the least busy of those open.
        best = None
        for link in links:
            if (
                link is not None
                and link.usable(loop)
                and (best is None or link.in_flight < best.in_flight)
            ):
                best = link
        if best is not None and best.in_flight and None in links:
            return None  # busy: open another
        return best

    async def link(self, loop: asyncio.AbstractEventLoop) -> Link:
        """A connection, opened if need be (raises what opening raises)."""
        ready = self.ready(loop)
        if ready is not None:
            return ready
        self._check_one_loop(loop)
        index = self._slot(loop)
        task = self._dialing[index]
        if task is None or task.done() or task.get_loop() is not loop:
            task = loop.create_task(self._dial(index, loop))
            task.add_done_callback(seen)
            self._dialing[index] = task
        return await asyncio.shield(task)

    def _check_one_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """One running event loop at a time: a connection serving a loop that
        runs in another thread is not taken from it."""
        for link in self.links:
            if (
                link is not None
                and link.loop is not loop
                and link.closed is None
                and link.generation == generation()
                and link.loop.is_running()
            ):
                raise ConfigError(
                    f"this client's connection to {self.name} serves an event loop "
                    "running in another thread: make a client per event loop"
                )

    def _slot(self, loop: asyncio.AbstractEventLoop) -> int:
        for index, link in enumerate(self.links):
            if link is None or not link.usable(loop):
                return index
        self._turn = (self._turn + 1) % len(self.links)
        return self._turn

    async def _dial(self, index: int, loop: asyncio.AbstractEventLoop) -> Link:
        old = self.links[index]
        if old is not None and old.usable(loop):
            return old
        self.links[index] = None
        if old is not None:
            drop(old, loop)
        link = await open_link(self.settings, loop)
        there = self.links[index]
        if there is not None and there.usable(loop):
            # Put there meanwhile (a Sentinel master's locating keeps the
            # connection it proved the master on): that one serves. Taking
            # its place would leave it open, never closed by close().
            link.close()
            return there
        if there is not None:
            drop(there, loop)
        self.links[index] = link
        return link

    def close(self) -> None:
        """Close every connection (waiters fail as if the server closed them)."""
        loop = running_loop()
        for index, link in enumerate(self.links):
            if link is not None:
                drop(link, loop)
            self.links[index] = None
        for task in self._dialing:
            if task is not None and not task.done() and task.get_loop() is loop:
                task.cancel()


def drop(link: Link, loop: asyncio.AbstractEventLoop | None) -> None:
    if link.generation != generation():
        _INHERITED.append(link)
    elif link.loop is loop:
        link.close()
    elif link.loop.is_running():  # in another thread: closed there
        with contextlib.suppress(RuntimeError):
            link.loop.call_soon_threadsafe(link.close)
    else:  # its loop runs no more (or not now): closed without it
        link.discard()


def retire(link: Link, loop: asyncio.AbstractEventLoop) -> None:
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


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def seen(task: asyncio.Task[Any]) -> None:
    # Every task waiting on a dial (or a locating) may have been cancelled:
    # its failure is then looked at here, so asyncio does not log it as
    # never retrieved.
    if not task.cancelled():
        task.exception()
