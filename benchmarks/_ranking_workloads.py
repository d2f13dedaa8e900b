"""Workloads and data sets of the ranking benchmark.

Views follow a Zipf law over a catalogue, as a shop's do: a few items take
most views. Every side counts the same views in the same order; workloads
are module-level context managers taking a URL, so that
``functools.partial(workload, url)`` pickles into a worker process.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Callable, Iterator
from functools import partial

from benchmarks import book
from benchmarks._counter_workloads import client_on, tier_on
from benchmarks._loops import Loop
from webtier import ranking
from webtier.config import Config, RankingSettings
from webtier.connect import connect
from webtier.sync import WebTier

CATALOGUE = 100_000  # items that can be viewed
_rng = random.Random(25)
_ZIPF = [1 / (k + 1) for k in range(CATALOGUE)]
VIEWS = tuple(f"item:{k}" for k in _rng.choices(range(CATALOGUE), weights=_ZIPF, k=20_000))
PER_STEP = 100
TOP = 10_000  # the page cache's admission: the 10,000 most viewed
# Admission checks ask about items in and out of the top, half and half.
CHECKS = tuple(f"item:{k}" for k in _rng.choices(range(2 * TOP), k=10_000))


def _each(call: Callable[[str], object], items: tuple[str, ...]) -> Loop:
    """A loop calling ``call(item)`` for the next ``PER_STEP`` items each step."""
    turns = itertools.cycle([items[i : i + PER_STEP] for i in range(0, len(items), PER_STEP)])

    def step() -> None:
        for item in next(turns):
            call(item)

    return Loop(step, PER_STEP)


# -- views ---------------------------------------------------------------------------


@contextlib.contextmanager
def webtier_direct(url: str) -> Iterator[Loop]:
    """``tier.ranking.record_view(item)``: one ZINCRBY round trip per view."""
    with tier_on(url) as tier:
        yield _each(tier.ranking.record_view, VIEWS)


@contextlib.contextmanager
def webtier_aggregated(url: str, flush_interval: float) -> Iterator[Loop]:
    """``tier.ranking.view_requests(item)`` (the sessions hook) with an
    aggregator open: counted in process; the closing flush is timed."""
    with tier_on(url) as tier, tier.ranking.aggregator(flush_interval=flush_interval) as views:
        loop = _each(tier.ranking.view_requests, VIEWS)
        yield Loop(loop.step, loop.ops_per_step, finish=views.close)


@contextlib.contextmanager
def book_views(url: str) -> Iterator[Loop]:
    with client_on(url) as conn:
        yield _each(partial(book.count_view, conn), VIEWS)


# -- admission checks ---------------------------------------------------------------------


@contextlib.contextmanager
def webtier_cached_top(url: str) -> Iterator[Loop]:
    """``top.admits(item)`` on the client-side copy of the top 10,000."""
    with tier_on(url) as tier, tier.ranking.top_items(TOP, refresh=5.0) as top:
        yield _each(top.admits, CHECKS)


@contextlib.contextmanager
def webtier_rank(url: str) -> Iterator[Loop]:
    """``tier.ranking.rank(item) < 10,000``: one ZREVRANK round trip per check."""
    with tier_on(url) as tier:
        rank = tier.ranking.rank

        def admits(item: str) -> bool:
            place = rank(item)
            return place is not None and place < TOP

        yield _each(admits, CHECKS)


@contextlib.contextmanager
def book_admission(url: str) -> Iterator[Loop]:
    with client_on(url) as conn:
        yield _each(partial(book.ranked_in_top, conn), CHECKS)


# -- one key against shards on one server ------------------------------------------------


@contextlib.contextmanager
def sharded_tier_on(url: str, shards: int | None) -> Iterator[WebTier]:
    """A tier whose ranking has ``shards`` shards (None: the client decides)."""
    client = connect(url)
    try:
        yield WebTier(client, Config(ranking=RankingSettings(shards=shards)))
    finally:
        client.close()


@contextlib.contextmanager
def views_in_shards(url: str, shards: int) -> Iterator[Loop]:
    """``tier.ranking.record_view(item)`` with the ranking in ``shards`` shards."""
    with sharded_tier_on(url, shards) as tier:
        yield _each(tier.ranking.record_view, VIEWS)


@contextlib.contextmanager
def rank_in_shards(url: str, shards: int) -> Iterator[Loop]:
    """``tier.ranking.rank(item)`` with the ranking in ``shards`` shards."""
    with sharded_tier_on(url, shards) as tier:
        yield _each(tier.ranking.rank, CHECKS)


@contextlib.contextmanager
def top_in_shards(url: str, shards: int, n: int) -> Iterator[Loop]:
    """``tier.ranking.top(n)`` with the ranking in ``shards`` shards: one
    read per step."""
    with sharded_tier_on(url, shards) as tier:
        yield Loop(partial(tier.ranking.top, n))


# -- data ----------------------------------------------------------------------------------


def load_rankings(url: str, book_url: str, items: int, shards: int | None = None) -> None:
    """The same ranking of ``items`` items in both layouts: item k has
    ``items - k`` views (the book stores them negated); webtier's in
    ``shards`` shards (None: the tier's default)."""
    scores = {f"item:{k}": items - k for k in range(items)}
    with sharded_tier_on(url, shards) as tier:
        # As the views would have put them: each item in its shard.
        by_shard: dict[str, dict[str, int]] = {}
        for item, views in scores.items():
            by_shard.setdefault(ranking.ops.shard_for(tier.config, item).viewed, {})[item] = views
        for key, found in by_shard.items():
            tier.client.zadd(key, found)
    with client_on(book_url) as conn:
        conn.zadd("viewed:", {item: -views for item, views in scores.items()})
