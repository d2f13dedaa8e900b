"""Connections for the sync executor: kept per thread, packed with hiredis.

redis-py 8's pool runs observability hooks, event dispatch, a fork check and
two lock rounds on every ``get_connection``/``release`` pair: on a small
machine that costs more than the round trip itself. A thread that calls
webtier keeps the connection it got from the pool and uses it again next
time, with the one check the pool's own ``get_connection`` makes that matters
for correctness: a connection that has data waiting or was closed by the
server (a restart) is reconnected *before* anything is written, so the
failure stays "not sent" and a write is never wrongly reported as maybe
applied.

Rules that keep this as safe as the pool:

* one thread, one connection per pool: no two threads share a socket;
* a re-entrant call in the same thread (a signal handler flushing a recorder
  while the thread is mid-call) gets a connection from the pool instead;
* when the thread ends, its connections go back to the pool;
* after a fork, connections of the parent are never used, nor released into
  the child's pool (which resets itself);
* the pool still creates every connection, so its limits and settings apply,
  and closing the pool closes held connections too.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

import hiredis
from redis import exceptions as rx

from webtier._protocol import Command

# hiredis's stub types the argument as a 1-tuple; it takes any command tuple.
_hiredis_pack: Callable[[Command], bytes] = cast(Any, hiredis.pack_command)


def pack(conn: Any, commands: Sequence[Command]) -> list[bytes]:
    """The commands in RESP, as redis-py would write them.

    hiredis packs a whole command in C, where redis-py encodes argument by
    argument in Python first; for the UTF-8 encoding both produce the same
    bytes (str, bytes, int and float arguments alike).
    """
    encoder = conn.encoder
    if encoder.encoding == "utf-8" and encoder.encoding_errors == "strict":
        return [b"".join(map(_hiredis_pack, commands))]  # one write
    packed: list[bytes] = conn.pack_commands(commands)
    return packed


class _Held:
    """A connection a thread keeps; back to its pool when the thread ends."""

    __slots__ = ("busy", "conn", "pid", "pool")

    def __init__(self, pool: Any, conn: Any) -> None:
        self.pool, self.conn, self.pid = pool, conn, os.getpid()
        self.busy = False

    def __del__(self) -> None:
        # Runs when the thread's locals go (thread end) or the holder is
        # replaced. A forked child's pool resets itself and ignores
        # connections it does not own.
        if self.pid == os.getpid():
            with contextlib.suppress(Exception):  # nothing to do at interpreter exit
                self.pool.release(self.conn)


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.held: dict[int, _Held] = {}


_local = _PerThread()
_STALE = (rx.ConnectionError, rx.TimeoutError, OSError)


def checkout(pool: Any) -> tuple[Any, _Held | None]:
    """A ready connection of ``pool`` for this thread, and its holder (None
    when it came from the pool for this call only). Raises the pool's
    connection errors: nothing has been written yet."""
    held = _local.held.get(id(pool))
    if held is None or held.pool is not pool or held.pid != os.getpid():
        conn = pool.get_connection()
        held = _local.held[id(pool)] = _Held(pool, conn)
    elif held.busy:  # re-entered from a signal handler: do not touch its socket
        return pool.get_connection(), None
    else:
        conn = held.conn
        try:
            stale = conn._sock is None or conn.can_read()
        except _STALE:
            stale = True
        if stale:  # closed by the server, or out of step: start afresh
            conn.disconnect()
            conn.connect()
    held.busy = True
    return conn, held


def checkin(pool: Any, conn: Any, held: _Held | None) -> None:
    if held is None:
        pool.release(conn)
    else:
        held.busy = False
