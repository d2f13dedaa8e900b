"""The redis-py shim: every private attribute of redis-py that webtier
touches is read here, and only here.

Connections for the sync executor: reused without the pool's toll, packed with hiredis.

redis-py 8's pool runs observability hooks, event dispatch, a fork check and
two lock rounds on every ``get_connection``/``release`` pair: on a small
machine that costs more than the round trip itself. So the sync executor
keeps the connections it is done with in a small LIFO of idle connections
per pool, in front of the pool, and takes from it first. Before reusing one
it makes the one check of the pool's own ``get_connection`` that matters for
correctness: a connection that has data waiting or was closed by the server
(a restart) is reconnected *before* anything is written, so such a failure
stays "not sent" and a write is never wrongly reported as maybe applied.
The check is one ``poll`` on a poll object kept per socket, plus a look at
what hiredis holds unparsed; redis-py's own ``can_read`` (several calls and
a new poll object each time) is kept for TLS sockets and other parsers.

Rules that keep this as safe as the pool:

* a connection is used by one call at a time (``list.pop``/``append`` are
  atomic), so the number in use is bounded by the calls in flight, as with
  the pool: the pool is asked for a new one only when none is idle here;
* connections go back to the pool, rather than into the idle list, once the
  pool has handed out half its ``max_connections``: webtier never hoards a
  pool the application shares for its own commands;
* only redis-py's plain ``ConnectionPool`` is fronted this way; a
  ``BlockingConnectionPool`` (or any other) is used as it is;
* after a fork, the parent's idle connections are never used;
* the pool still creates every connection, so its settings apply, and
  closing the pool closes the idle connections too.

The private attributes this relies on (a connection's ``_sock`` and
``_parser`` with its hiredis ``_reader``, a pool's ``_created_connections``)
are checked once, at import, on a connection and a pool that are built but
never connected. Where redis-py's shape differs, :data:`FAST` is False and
everything here falls back to redis-py's public API: the pool's own
``get_connection``/``release`` and the connection's ``read_response``,
slower but equally correct.

webtier's own asyncio client (:mod:`webtier._core.mux`) parses replies with
hiredis itself and reads one thing of redis-py's: :func:`parse_error`, which
turns an error reply into redis-py's exception for it (``MovedError`` with
its ``host`` and ``port``, ``NoScriptError``, ``AuthenticationError``...),
the classes :mod:`webtier._core.wire` reads. It is redis-py's parser's when
that one, checked at import, still does so; else a table of webtier's own
for the replies webtier acts on.
"""

import functools
import os
import select
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

import hiredis
from redis import ConnectionPool
from redis import exceptions as rx

from webtier._core.protocol import Command

_HAS_POLL = hasattr(select, "poll")


def _private_shape_ok() -> bool:
    """Does this redis-py have the private attributes the fast path reads?"""
    import redis

    try:
        conn = redis.Connection()  # type: ignore[no-untyped-call]
        pool = ConnectionPool()
        return (
            hasattr(conn, "_sock")
            and callable(getattr(conn._parser, "read_response", None))
            and isinstance(pool._created_connections, int)
        )
    except Exception:  # a constructor that changed too
        return False


FAST = _private_shape_ok()

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


class _Idle:
    """The idle connections of one pool, in the process that made them: each
    as ``(connection, its socket, a poll object on that socket or None)``."""

    __slots__ = ("conns", "pid")

    def __init__(self) -> None:
        self.conns: list[tuple[Any, Any, Any]] = []
        self.pid = os.getpid()


# Kept on the pool itself, so it goes with the pool; the name is webtier's own.
_IDLE_ATTR = "_webtier_idle"
_idle_lock = threading.Lock()
_STALE = (rx.ConnectionError, rx.TimeoutError, OSError)


def _idle_of(pool: Any) -> _Idle | None:
    if not FAST or type(pool) is not ConnectionPool:
        return None
    idle: _Idle | None = getattr(pool, _IDLE_ATTR, None)
    if idle is None or idle.pid != os.getpid():
        with _idle_lock:
            idle = getattr(pool, _IDLE_ATTR, None)
            if idle is None or idle.pid != os.getpid():  # new, or inherited over a fork
                idle = _Idle()
                setattr(pool, _IDLE_ATTR, idle)
    return idle


_POLL_ATTR = "_webtier_poll"  # (socket, its poll object), on the connection


def _poller(conn: Any, sock: Any) -> Any:
    """A poll object on ``sock`` for the quick check of :func:`_quiet`, made
    once per socket; None where only redis-py's own check will do (TLS
    sockets buffer decrypted bytes that poll cannot see; parsers without
    hiredis keep buffers of their own)."""
    made = getattr(conn, _POLL_ATTR, None)
    if made is not None and made[0] is sock:
        return made[1]
    poller = None
    reader = getattr(conn._parser, "_reader", None)
    if type(sock) is socket.socket and hasattr(reader, "has_data") and _HAS_POLL:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
    setattr(conn, _POLL_ATTR, (sock, poller))
    return poller


def _quiet(conn: Any, sock: Any, poller: Any) -> bool:
    """Is the connection open with nothing waiting to be read (no data, no
    EOF, no error, nothing buffered in its parser)?"""
    if conn._sock is not sock or sock is None:  # closed, or reconnected since
        return False
    try:
        if poller is None:
            return not conn.can_read()
        # POLLHUP and POLLERR are reported whatever the mask: EOF counts.
        return not (conn._parser._reader.has_data() or poller.poll(0))
    except _STALE:
        return False
    except AttributeError:  # disconnected by another thread meanwhile
        return False


def checkout(pool: Any) -> Any:
    """A connection of ``pool`` ready for a write. Raises the pool's
    connection errors: nothing has been written yet."""
    idle = _idle_of(pool)
    if idle is None or not idle.conns:
        return pool.get_connection()
    try:
        conn, sock, poller = idle.conns.pop()
    except IndexError:  # another thread took the last one
        return pool.get_connection()
    if not _quiet(conn, sock, poller):  # closed by the server, or out of step
        try:
            conn.disconnect()
            conn.connect()
        except BaseException:
            pool.release(conn)
            raise
    return conn


def checkin(pool: Any, conn: Any) -> None:
    idle = _idle_of(pool)
    if idle is not None and int(pool._created_connections) <= int(pool.max_connections) // 2:
        sock = conn._sock
        idle.conns.append((conn, sock, None if sock is None else _poller(conn, sock)))
    else:
        pool.release(conn)


def reply_reader(conn: Any) -> Callable[..., Any]:
    """How to read one reply of ``conn``: ``read(disable_decoding=True,
    timeout=None)``, returning error replies as values rather than raising
    them. From the parser itself on the fast path: the connection's
    ``read_response`` raises them and formats its address for a message on
    every reply."""
    if FAST:
        return conn._parser.read_response  # type: ignore[no-any-return]
    return functools.partial(_read_public, conn)


def _read_public(conn: Any, *, disable_decoding: bool = False, timeout: float | None = None) -> Any:
    try:
        if timeout is None:
            return conn.read_response(disable_decoding=disable_decoding)
        return conn.read_response(disable_decoding=disable_decoding, timeout=timeout)
    except (rx.ResponseError, rx.BusyLoadingError) as error:
        return error


# -- error replies, for webtier's own asyncio client ------------------------------------

# The error replies webtier acts on, by their first word, when redis-py's
# parser cannot be used (see parse_error).
_ERROR_CLASSES: dict[str, type[rx.ResponseError]] = {
    "MOVED": rx.MovedError,
    "ASK": rx.AskError,
    "NOSCRIPT": rx.NoScriptError,
    "TRYAGAIN": rx.TryAgainError,
    "CLUSTERDOWN": rx.ClusterDownError,
    "MASTERDOWN": rx.MasterDownError,
    "READONLY": rx.ReadOnlyError,
    "NOPERM": rx.NoPermissionError,
}
_AUTH_ERRORS = ("WRONGPASS", "NOAUTH")


def _parse_error_public(message: str) -> Exception:
    code, _, rest = message.partition(" ")
    if code in _AUTH_ERRORS:
        return rx.AuthenticationError(message)
    if code == "LOADING":
        return rx.BusyLoadingError(message)
    kind = _ERROR_CLASSES.get(code)
    return rx.ResponseError(message) if kind is None else kind(rest)


def _private_parser() -> Callable[[str], Exception] | None:
    """redis-py's own error parser, if it still maps replies as webtier reads them."""
    try:
        from redis._parsers.base import BaseParser

        parse: Callable[[str], Exception] = BaseParser.parse_error
        moved = parse("MOVED 3999 127.0.0.1:6381")
        ok = (
            isinstance(moved, rx.MovedError)
            and (moved.host, int(moved.port)) == ("127.0.0.1", 6381)
            and isinstance(parse("NOSCRIPT No matching script."), rx.NoScriptError)
            and isinstance(parse("WRONGPASS invalid username-password"), rx.AuthenticationError)
        )
    except Exception:  # moved, renamed, or a constructor that changed
        return None
    return parse if ok else None


parse_error: Callable[[str], Exception] = _private_parser() or _parse_error_public
