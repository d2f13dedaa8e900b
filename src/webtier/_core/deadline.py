"""Time limits: how long one operation may wait for Redis, its tries included.

A web request has a budget; a hung Redis server (stopped, swapping, paused)
must cost it at most that, not the client's socket timeout times the tries.
:func:`time_limit` sets a limit for every operation started in its context
(a thread, or an asyncio task and what it awaits): the middlewares set one
per request. ``RetryPolicy.time_limit`` is the tier's default otherwise.

The executors turn the limit into a deadline when an operation starts and
publish it here while the operation runs, so that connections webtier's
``connect()`` made bound their own connect and handshake by it too
(:mod:`webtier.connect`). Time spent in an operation's ``Call`` (a database
query) does not count: the limit is for waiting on Redis.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextvars import ContextVar, Token

from webtier.errors import ConfigError

_LIMIT: ContextVar[float | None] = ContextVar("webtier_time_limit", default=None)


class Budget:
    """The deadline of one running operation (``time.monotonic()`` seconds);
    the executors push it back by the time its ``Call`` steps take."""

    __slots__ = ("deadline",)

    def __init__(self, limit: float) -> None:
        self.deadline = time.monotonic() + limit

    def left(self) -> float:
        return self.deadline - time.monotonic()


_BUDGET: ContextVar[Budget | None] = ContextVar("webtier_budget", default=None)


def check_limit(seconds: object, what: str = "time limit") -> float | None:
    """``seconds`` as a limit: a positive finite number of seconds, or None."""
    if seconds is None:
        return None
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or not 0 < seconds <= 86400
    ):
        raise ConfigError(f"{what} must be None or seconds in (0, 86400], got {seconds!r}")
    return float(seconds)


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Every webtier operation started inside the block gives up after
    ``seconds`` of waiting for Redis, its retries included: it raises
    ``RedisUnavailable`` (``OutcomeUnknown`` for a write that was sent).
    ``None`` lifts a limit set around the block. Works in threads and in
    asyncio tasks alike::

        with webtier.time_limit(0.5):
            tier.sessions.check(token)
    """
    token = _LIMIT.set(check_limit(seconds))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def current_limit(default: float | None) -> float | None:
    """The limit set by :func:`time_limit` around the caller, else ``default``."""
    limit = _LIMIT.get()
    return default if limit is None else limit


def time_left() -> float | None:
    """Seconds left before the running operation's deadline (may be <= 0),
    or None when it has none."""
    budget = _BUDGET.get()
    return None if budget is None else budget.left()


def publish(budget: Budget) -> Token[Budget | None]:
    """Makes ``budget`` the running operation's, for :func:`time_left`."""
    return _BUDGET.set(budget)


def unpublish(token: Token[Budget | None]) -> None:
    _BUDGET.reset(token)
