"""One multiplexed connection to one Redis server: framing, ordering,
coalesced writes, back-pressure, and what every waiter learns when it breaks.

Redis answers the commands of a connection in the order it read them, so a
connection shared by every task needs no request ids: the replies are
matched to a FIFO of :class:`Pending` sends. What keeps that match exact:

* a send is packed and queued in one synchronous step (no ``await`` between
  the bytes and their place in the queue), so one operation's pipeline stays
  contiguous on the wire and in the FIFO;
* the sends of every task in one loop iteration are written together: the
  first one schedules a flush with ``call_soon``, which runs after the tasks
  already woken in that iteration have queued theirs; a read that resolved
  waiters schedules it at once, right behind the wake-ups of the tasks it
  woke, so what they send next goes out in the same iteration, in one write;
* a waiter that gives up (cancelled, or past its deadline) keeps its place in
  the FIFO once written: its replies are read and dropped when they come.
  One that gives up before the flush is never written at all, so "not sent"
  stays true;
* anything unexpected (a reply nobody asked for, a protocol error, no reply
  within the socket timeout while waiters wait) closes the connection and
  fails every waiter: written sends as maybe delivered, queued ones as not.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import deque
from typing import Any

import hiredis
from redis import exceptions as rx

from webtier._core.actions import Outcome, TimeLimitReached
from webtier._core.not_redis import not_redis
from webtier._core.redispy import parse_error

_NO_REPLY: Any = object()  # what the reader returns while a reply is incomplete

# Bumped in a child process after fork(): connections made before it belong
# to the parent and are never used again (their sockets are shared with it).
_generation = 0


def _forked() -> None:
    global _generation
    _generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def generation() -> int:
    return _generation


def outcome_of(result: list[Any] | Outcome) -> Outcome:
    """What a :class:`Pending` future resolves to, as an :class:`Outcome`."""
    return Outcome(result) if type(result) is list else result  # type: ignore[return-value]


class Pending:
    """One send: its packed commands until written, the replies read so far,
    and the future its sender awaits: resolved with the list of replies when
    they all came (no allocation more on the hot path), or with an
    :class:`Outcome` saying what broke (:func:`outcome_of` reads either)."""

    __slots__ = ("count", "future", "packed", "replies", "written")

    def __init__(
        self, future: asyncio.Future[list[Any] | Outcome], packed: bytes, count: int
    ) -> None:
        self.future = future
        self.packed = packed
        self.count = count
        self.replies: list[Any] = []
        self.written = False


class Limits:
    """How much one connection holds before its senders wait for room."""

    __slots__ = ("commands", "queued_bytes", "read_timeout")

    def __init__(self, commands: int, queued_bytes: int, read_timeout: float | None) -> None:
        self.commands = commands  # sent or queued and not yet answered
        self.queued_bytes = queued_bytes  # packed and not yet written
        self.read_timeout = read_timeout  # seconds without a byte while replies are due


class Link(asyncio.Protocol):
    """One connection, shared by every task of the loop it was made in."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limits: Limits, name: str) -> None:
        self.loop = loop
        self.limits = limits
        self.name = name
        self.generation = _generation
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader(notEnoughData=_NO_REPLY, replyError=parse_error)
        self.queued: list[Pending] = []  # packed, not yet written
        self.waiting: deque[Pending] = deque()  # written; replies due in this order
        self.in_flight = 0  # commands queued or waiting
        self.queued_bytes = 0
        self.flush_due = False
        self.paused = False  # the transport's buffer is full: write nothing more
        self.closed: BaseException | None = None
        self.room: deque[asyncio.Future[None]] = deque()  # senders waiting for room
        self.progress = 0  # reads so far: what the watchdog looks at
        self._watched = -1
        self._watchdog: asyncio.TimerHandle | None = None

    # -- the sending side ------------------------------------------------------------

    def usable(self, loop: asyncio.AbstractEventLoop) -> bool:
        return self.closed is None and self.loop is loop and self.generation == _generation

    def has_room(self, size: int) -> bool:
        limits = self.limits
        if self.in_flight == 0:
            return True  # one send larger than the limits still goes, alone
        return self.in_flight < limits.commands and self.queued_bytes + size <= limits.queued_bytes

    def send(self, packed: bytes, count: int) -> Pending:
        """Queue ``count`` packed commands as one contiguous send; the
        caller awaits the returned ``Pending.future``."""
        pending = Pending(self.loop.create_future(), packed, count)
        if self.closed is not None:
            pending.future.set_result(Outcome([], self.closed, delivered=False))
            return pending
        self.queued.append(pending)
        self.in_flight += count
        self.queued_bytes += len(packed)
        if not self.flush_due and not self.paused:
            self.flush_due = True
            self.loop.call_soon(self._flush)
        if self.room:  # a sender woken for room has sent: the next may fit too
            self._wake()
        return pending

    def _flush(self) -> None:
        self.flush_due = False
        queued = self.queued
        if self.closed is not None or self.paused or not queued or self.transport is None:
            return
        self.queued = []
        self.queued_bytes = 0
        waiting = self.waiting
        chunks = []
        for pending in queued:
            if pending.future.done():  # gave up before it was written: never sent
                self.in_flight -= pending.count
                continue
            pending.written = True
            chunks.append(pending.packed)
            pending.packed = b""
            waiting.append(pending)
        if chunks:
            self.transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
            if self._watchdog is None:
                self._arm()
        self._wake()

    def expire(self, pending: Pending) -> None:
        """The sender's deadline passed: it gets ``TimeLimitReached`` now; a
        written send's replies are dropped when they come."""
        if not pending.future.done():
            late = TimeLimitReached("no answer within the time limit")
            pending.future.set_result(Outcome(pending.replies, late, delivered=pending.written))

    async def wait_for_room(self, size: int) -> None:
        """Until the connection has room for ``size`` more bytes (or closed).
        Senders wait in line: the first is woken when room is made, and once
        it has sent, the next (see :meth:`send`); one woken without room
        enough waits again at the head of the line."""
        again = False
        while self.closed is None and not self.has_room(size):
            waiter = self.loop.create_future()
            if again:
                self.room.appendleft(waiter)
            else:
                self.room.append(waiter)
            again = True
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # it was woken, and will not send: the next one's turn
                raise

    def _wake(self) -> None:
        room = self.room
        if self.closed is not None:  # every sender learns it at once
            while room:
                waiter = room.popleft()
                if not waiter.done():
                    waiter.set_result(None)
            return
        while room and self.has_room(0):
            waiter = room.popleft()
            if not waiter.done():  # else cancelled meanwhile: the next one
                waiter.set_result(None)
                return

    # -- asyncio's callbacks ---------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.progress += 1
        reader = self.reader
        reader.feed(data)
        waiting = self.waiting
        woke = False
        while True:
            try:
                reply = reader.gets()
            except hiredis.ProtocolError as error:
                # The very first bytes (the greeting's reply) say what answered.
                first = not_redis(self.name, data) if self.progress == 1 else None
                self.abort(first or rx.ConnectionError(f"{self.name}: not a Redis reply ({error})"))
                return
            if reply is _NO_REPLY:
                break
            if not waiting:
                self.abort(rx.ConnectionError(f"{self.name}: a reply no command asked for"))
                return
            pending = waiting[0]
            replies = pending.replies
            replies.append(reply)
            if len(replies) == pending.count:
                waiting.popleft()
                self.in_flight -= pending.count
                future = pending.future
                if not future.done():  # else cancelled or out of time: dropped
                    future.set_result(replies)
                    woke = True
        if woke and not self.flush_due and not self.paused:
            # The tasks just woken run next, in the order they were woken;
            # a flush scheduled now runs right after them, in the same loop
            # iteration, and writes what they send in one write.
            self.flush_due = True
            self.loop.call_soon(self._flush)
        if self.room:
            self._wake()

    def eof_received(self) -> bool:
        return False  # close: Redis never half-closes a connection it serves

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f": {exc}" if exc is not None else ""
        self._fail(rx.ConnectionError(f"connection to {self.name} closed{reason}"))

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.queued and not self.flush_due:
            self.flush_due = True
            self.loop.call_soon(self._flush)

    # -- failure ---------------------------------------------------------------------

    def _arm(self) -> None:
        timeout = self.limits.read_timeout
        if timeout is not None and self.closed is None:
            self._watched = self.progress
            self._watchdog = self.loop.call_later(timeout, self._check)

    def _check(self) -> None:
        # Replies have been due for a whole timeout with not a byte read: the
        # server hangs (stopped, swapping, cut off).
        self._watchdog = None
        if not self.waiting:
            return
        if self.progress == self._watched:
            timeout = self.limits.read_timeout
            self.abort(rx.TimeoutError(f"{self.name}: no reply within {timeout} s"))
        else:
            self._arm()

    def abort(self, error: BaseException) -> None:
        """Close the connection now; every waiter gets ``error``."""
        self._fail(error)
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        self.abort(rx.ConnectionError(f"connection to {self.name} closed by the client"))

    def discard(self) -> None:
        """Close a connection whose event loop is not running (or closed):
        its transport is told, for when that loop runs again, and its socket
        is closed now."""
        self._fail(rx.ConnectionError(f"connection to {self.name} left with its event loop"))
        if self.transport is None:
            return
        sock = self.transport.get_extra_info("socket")
        with contextlib.suppress(RuntimeError):  # a closed loop takes no callback
            self.transport.abort()
        raw = getattr(sock, "_sock", sock)
        with contextlib.suppress(Exception):  # a transport of uvloop's has no socket of Python's
            raw.close()

    def _fail(self, error: BaseException) -> None:
        if self.closed is not None:
            return
        self.closed = error
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        waiting, queued = self.waiting, self.queued
        self.waiting, self.queued = deque(), []
        self.in_flight = self.queued_bytes = 0
        for pending in waiting:  # written: may have reached the server
            if not pending.future.done():
                pending.future.set_result(Outcome(pending.replies, error, delivered=True))
        for pending in queued:  # never written
            if not pending.future.done():
                pending.future.set_result(Outcome(pending.replies, error, delivered=False))
        self._wake()
