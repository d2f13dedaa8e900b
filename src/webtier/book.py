"""The book's functions, under the book's names and arguments.

For readers of *Redis in Action*: ``conn`` first, as in the listings, and any
redis-py client will do (``Redis`` or ``RedisCluster``, with or without
``decode_responses``); results come back as ``str``/``int``/``float``, never
bytes. Each function is a thin wrapper over webtier's real API, with its
default settings and key prefix: where the book's listing has a bug (see
``SPEC.md``), these do what the book meant.

Daemons (``clean_counters``...) run until ``stop`` is set or the process is
interrupted; ``once=True`` runs a single pass and returns.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from webtier.config import Config
from webtier.sync import WebTier
from webtier.timing import AccessTimer
from webtier.workers import JOBS, Worker

T = TypeVar("T")

_tiers: weakref.WeakKeyDictionary[Any, WebTier] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def tier_for(conn: Any) -> WebTier:
    """The WebTier the book's functions use for ``conn`` (one per client)."""
    with _lock:
        tier = _tiers.get(conn)
        if tier is None:
            tier = _tiers[conn] = WebTier(conn, Config())
        return tier


def _daemon(conn: Any, job: str, once: bool, stop: threading.Event | None) -> None:
    Worker(tier_for(conn), [JOBS[job]], once=once, stop=stop).run()


# -- 5.2.1 counters --------------------------------------------------------------------


def update_counter(conn: Any, name: str, count: int = 1, now: float | None = None) -> None:
    """Add ``count`` to counter ``name`` at every precision (Listing 5.3)."""
    tier_for(conn).counters.record(name, count, now)


def get_counter(conn: Any, name: str, precision: int) -> list[tuple[int, int]]:
    """``(slice start, count)`` pairs of one precision, oldest first (Listing 5.4)."""
    return tier_for(conn).counters.get(name, precision)


def clean_counters(conn: Any, once: bool = False, *, stop: threading.Event | None = None) -> None:
    """The cleanup daemon (Listing 5.5): a pass a minute, each precision on
    the book's schedule. ``once=True`` runs one pass and returns."""
    _daemon(conn, "counters", once, stop)


# -- 5.2.2-5.2.3 statistics and access time ----------------------------------------------


def update_stats(
    conn: Any, context: str, type: str, value: float, timeout: float = 5
) -> list[float]:
    """Add ``value`` to the current hour's stats of (``context``, ``type``)
    and return ``[count, sum, sumsq]`` (Listing 5.6).

    One atomic script instead of the book's WATCH/MULTI retry loop, so there
    is no contention to wait out: ``timeout`` is accepted for the book's
    signature and never reached. The hour is the Redis server's."""
    recorded = tier_for(conn).stats.record(context, type, value)
    return [recorded.count, recorded.sum, recorded.sumsq]


def get_stats(conn: Any, context: str, type: str) -> dict[str, float | None]:
    """The current hour's ``min``, ``max``, ``count``, ``sum``, ``sumsq``,
    ``average`` and ``stddev`` (sample standard deviation, as the book
    computes it) of (``context``, ``type``) (Listing 5.7). With no value yet
    this hour, ``count`` is 0 and the others are 0 or None."""
    summary = tier_for(conn).stats.get(context, type)
    return {
        "min": summary.min,
        "max": summary.max,
        "count": summary.count,
        "sum": summary.sum,
        "sumsq": summary.sumsq,
        "average": summary.mean,
        "stddev": summary.stddev,
    }


def access_time(conn: Any, context: str) -> AccessTimer:
    """Time a ``with`` block as ``context``'s ``AccessTime``, even when it
    raises (Listing 5.8); :func:`slowest` ranks the contexts."""
    return tier_for(conn).stats.access_time(context)


def process_view(conn: Any, callback: Callable[[], T], *, path: str) -> T:
    """Run a view, timed as the context ``path`` (the book's
    ``request.path``; give a route template, not a raw path)."""
    with access_time(conn, path):
        return callback()


def slowest(conn: Any, n: int = 100) -> list[tuple[str, float]]:
    """The ``n`` contexts with the highest average ``AccessTime`` this hour,
    slowest first: the reader of ``slowest:AccessTime`` the book leaves out."""
    return tier_for(conn).stats.slowest(n)
