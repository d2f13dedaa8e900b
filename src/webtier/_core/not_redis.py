"""Something that answers, but not as Redis, said as such at once.

A URL that points at an HTTP server (a port mistyped, the shop's own
address) used to fail as an outage: the server waits for the end of a
request that never comes, the connection times out, and the wire's retries
make that 20 s before "no answer after 4 tries". Instead, every new
connection's greeting ends with an empty line (:data:`GREETING_END`):
Redis skips it (an empty inline command, no reply), while to an HTTP server
it ends the request's headers, so it answers at once (400). The first bytes
of a reply that is not RESP then say what answered, as a
:class:`~webtier.errors.ConfigError`: the URL is wrong, and no retry helps.

:func:`not_redis` is the verdict (no I/O); :func:`greet` the sync
greeting, for redis-py's connections; webtier's asyncio client appends
:data:`GREETING_END` to its own greeting (:mod:`webtier._core.mux.dial`).
"""

from __future__ import annotations

import socket

from redis import exceptions as rx

from webtier.errors import ConfigError

GREETING_END = b"\r\n"  # after a greeting's last "\r\n": the empty line
# The first byte of every RESP2 and RESP3 reply.
_RESP_FIRST = frozenset(b"+-:$*_,#!=(%~>|")
_LOOKS_LIKE = (
    (b"HTTP/", "HTTP"),
    (b"<", "HTTP"),  # an HTML page, sent with no status line (HTTP/0.9 style)
    (b"SSH-", "SSH"),
    (b"\x15\x03", "TLS: use rediss://"),  # a TLS alert
    (b"\x16\x03", "TLS: use rediss://"),  # a TLS handshake
    (b"220", "SMTP or FTP"),
)
_PING = b"*1\r\n$4\r\nPING\r\n"


def not_redis(name: str, first: bytes) -> ConfigError | None:
    """The error to raise when ``first``, the start of what ``name`` sent
    back, is not a Redis reply; None when it is (or nothing came)."""
    if not first or first[0] in _RESP_FIRST:
        return None
    for start, kind in _LOOKS_LIKE:
        if first.startswith(start):
            looks = f"it looks like {kind}"
            break
    else:
        looks = f"its first bytes: {first[:16]!r}"
    return ConfigError(f"{name} answered, but not as Redis ({looks})")


def greet(sock: socket.socket, name: str) -> None:
    """PING and the empty line on a new connection, before redis-py's own
    handshake; the socket's timeout is the connect timeout. Raises
    ConfigError (not Redis), or redis-py's TimeoutError/ConnectionError."""
    try:
        sock.sendall(_PING + GREETING_END)
        reply = b""
        while b"\r\n" not in reply:  # +PONG, or -NOAUTH: one line
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
            error = not_redis(name, reply)
            if error is not None:
                raise error
    except TimeoutError:
        raise rx.TimeoutError(f"no answer from {name} within the connect timeout") from None
    except OSError as error:
        raise rx.ConnectionError(f"error greeting {name}: {error}") from error
    if not reply:
        raise rx.ConnectionError(f"{name} closed the connection at once")
