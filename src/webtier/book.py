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
from typing import Any

from webtier.config import Config
from webtier.sync import WebTier
from webtier.workers import JOBS, Worker

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
