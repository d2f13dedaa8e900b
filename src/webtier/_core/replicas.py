"""Reads that tolerate lag, served by a replica when the URL allows it.

A Sentinel URL may say ``?replica_reads=yes``; then the reads issued inside
:func:`replica_reads` (the dashboard's, the read-only CLI commands') go to
a replica of the master, sparing the master their load. Replication is
asynchronous: a replica may not hold the master's last writes yet, so only
reads whose caller accepts that enter the block.

Only a step whose every request is a read (``Request.writes`` False) and
holds no script is sent there: a write never is, whatever the context, and
a replica does not hold the scripts the wire loads on the master. A read
the replica does not answer cleanly (none reachable, an error reply) goes
to the master, by the wire's rules: it changed nothing where it went.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from webtier._core.protocol import ScriptCall, Step
from webtier._core.wire import _requests
from webtier.errors import ConfigError

_TOLERATED: ContextVar[bool] = ContextVar("webtier_replica_reads", default=False)


@contextlib.contextmanager
def replica_reads() -> Iterator[None]:
    """The reads started inside the block may be served by a replica, and
    so miss the master's last writes, if the URL opted in
    (``redis+sentinel://...?replica_reads=yes``); else the block changes
    nothing. Writes inside it still go to the master. Works in threads and
    in asyncio tasks alike::

        with webtier.replica_reads():
            tier.stats.slowest(10)
    """
    token = _TOLERATED.set(True)
    try:
        yield
    finally:
        _TOLERATED.reset(token)


def lag_tolerated(step: Step) -> bool:
    """Whether ``step`` may go to a replica: inside :func:`replica_reads`,
    every request of it a read of plain commands."""
    if not _TOLERATED.get():
        return False
    for request in _requests(step):
        if request.writes:
            return False
        for command in request.commands:
            if type(command) is ScriptCall:
                return False
    return True


def opted_in(value: str, url: str) -> bool:
    """The ``replica_reads`` query parameter of ``url``, as a yes or a no."""
    word = value.lower()
    if word not in ("yes", "true", "1", "no", "false", "0"):
        raise ConfigError(f"replica_reads must be yes or no, got {value!r} in {url!r}")
    return word in ("yes", "true", "1")
