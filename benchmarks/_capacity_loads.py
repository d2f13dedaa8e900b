"""Data sets of the capacity benchmark, written through webtier's public API
(sessions in bulk, as the sessions bench writes them: through the API a full
session is 32 round trips), and what the server holds of them afterwards.

Each loader takes a URL and a count, so the harness can read ``used_memory``
around it (:meth:`Harness.memory`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from functools import partial

from benchmarks import _counter_workloads, _session_workloads
from benchmarks._cluster_workloads import INVENTORY, tier_on
from benchmarks._stats_workloads import VALUES
from webtier._core.protocol import Call
from webtier.config import ACCESS_TIME
from webtier.pagecache import BOOK_RULES, PageRequest
from webtier.sync import WebTier
from webtier.types import Rendered

COUNTER_SAMPLES = 120  # a day apart: every precision keeps 120
STATS_VALUES = 200  # values a context records in a period
VIEWED_PER_SESSION = _session_workloads.HELD  # 28: the most between two trims
CART = _session_workloads.CART
ITEM_PAGE = "http://shop.test/item?item={}"


def incompressible(size: int, seed: int) -> bytes:
    """A page body gzip cannot shrink, so that it is stored as it is and a
    page's bytes in Redis are its size plus the cache's own."""
    return random.Random(seed).randbytes(size)


def _rendered(body: bytes) -> Rendered:
    return Rendered(200, (("content-length", str(len(body))),), body, 300.0)


def cache_pages(tier: WebTier, items: range, body_bytes: int) -> None:
    """Serve (and so cache) the item page of each of ``items``; each item
    gets the view that admits its page."""
    for item in items:
        tier.ranking.record_view(str(item))
        plan = BOOK_RULES.plan(tier.config, PageRequest.from_url(ITEM_PAGE.format(item)))
        if plan is None:
            raise RuntimeError("the book's rules do not cache item pages")
        body = incompressible(body_bytes, item)
        served = tier.pagecache.serve(plan, Call(partial(_rendered, body)))
        if served.outcome != "MISS":
            raise RuntimeError(f"item page {item} was {served.outcome}, not a stored miss")


# -- memory loaders: one kind of thing each ----------------------------------------------


def load_sessions(url: str, sessions: int) -> None:
    _session_workloads.load_webtier(url, sessions)


def count_sessions(url: str) -> int:
    return _session_workloads.webtier_sessions(url)


def counter_names(counters: int) -> list[str]:
    return [f"mem:{i}" for i in range(counters)]


def load_counters(url: str, counters: int) -> None:
    events = _counter_workloads.memory_events(counters, COUNTER_SAMPLES, time.time())
    _counter_workloads.load_webtier(url, events)


def count_counter_samples(url: str, counters: int) -> int:
    return _counter_workloads.count_webtier_samples(url, counter_names(counters))


def stats_contexts(contexts: int) -> Iterator[str]:
    return (f"/shop/page-{i}/{{id}}" for i in range(contexts))


def load_stats(url: str, contexts: int) -> None:
    """``STATS_VALUES`` page times into each context, this period."""
    with tier_on(url) as tier:
        for context in stats_contexts(contexts):
            for value in VALUES[:STATS_VALUES]:
                tier.stats.record(context, ACCESS_TIME, value)


def load_pages(url: str, pages: int, body_bytes: int) -> None:
    with tier_on(url) as tier:
        cache_pages(tier, range(pages), body_bytes)


def load_rows(url: str, rows: int) -> None:
    """Rows as a row cache keeps them: scheduled, and cached by a refresh
    (a read-through also leaves its load's bookkeeping for a while)."""
    with tier_on(url) as tier:
        for row_id in range(1, rows + 1):
            tier.rows.schedule(INVENTORY, row_id, 60)
        report = tier.rows.refresh_due([INVENTORY])
        if report.stored != rows:
            raise RuntimeError(f"{report.stored} of {rows} rows were cached")


def load_ranking(url: str, items: int) -> None:
    with tier_on(url) as tier:
        for item in range(items):
            tier.ranking.record_view(f"item:{item}")


def count_ranked(url: str, items: int) -> int:
    with tier_on(url) as tier:
        return len(tier.ranking.top(items))
