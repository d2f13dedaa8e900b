"""Workloads of the Cluster benchmark: each capability's hot operation
through webtier's public API, the same on one server and on a Cluster.

Every workload is a module-level context manager taking a URL (a single
server's ``redis://`` or a Cluster's ``redis+cluster://``), so that
``functools.partial(workload, url)`` pickles into a worker process, which
opens a client of its own and its own sessions, pages and rows.

Each workload spreads its work over many keys, as a shop does: 200 sessions a
process, 1,000 counter names, 1,000 stats contexts, 300 cached item pages,
1,000 cached rows, and views of a 100,000-item catalogue drawn from a Zipf law.
What a workload cannot spread (the view ranking, until it is sharded) shows
in the masters' shares.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from benchmarks._loops import Loop
from benchmarks._ranking_workloads import VIEWS
from webtier import capacity
from webtier._core.protocol import Call
from webtier.config import ACCESS_TIME
from webtier.connect import connect
from webtier.pagecache import BOOK_RULES, PageRequest
from webtier.rows import FunctionSource
from webtier.sync import WebTier
from webtier.types import Rendered

PER_STEP = 10
SESSIONS_PER_PROCESS = 200
# Enough names that their shards fall on the masters as the layout's do (a
# hundred contexts over 64 shards put 48 % of them on one of 3 masters).
PAGES = 300  # cached item pages, each admitted by a view of its item
ROWS = 1_000  # cached inventory rows
NAMES = tuple(f"page:/item/{i}" for i in range(1_000))
CONTEXTS = tuple(f"/shop/page-{i}/{{id}}" for i in range(1_000))
_rng = random.Random(17)
# Page times in seconds, log-normal around 18 ms (as the stats bench's).
TIMES = tuple(_rng.lognormvariate(-4.0, 0.6) for _ in range(1000))
# A page gzip cannot shrink, stored as it is: 10,000 bytes, the capacity
# model's default page.
PAGE_BYTES = 10_000
PAGE_BODY = random.Random(10).randbytes(PAGE_BYTES)


@contextlib.contextmanager
def tier_on(url: str) -> Iterator[WebTier]:
    # A loaded 2-core machine can stall a client for seconds; a lost reply
    # must not end a throughput run.
    client = connect(url, socket_timeout=60)
    try:
        yield WebTier(client)
    finally:
        client.close()


def _each(call: Callable[..., object], arguments: Iterator[tuple[Any, ...]]) -> Loop:
    """A loop calling ``call(*arguments)`` with the next ``PER_STEP`` of them each step."""

    def step() -> None:
        for args in itertools.islice(arguments, PER_STEP):
            call(*args)

    return Loop(step, PER_STEP)


def _one_each(values: Iterator[Any]) -> Iterator[tuple[Any]]:
    return ((value,) for value in values)


def _sessions(tier: WebTier) -> list[str]:
    return [tier.sessions.new(user=f"user:{n}") for n in range(SESSIONS_PER_PROCESS)]


def _rendered() -> Rendered:
    return Rendered(200, (("content-length", str(len(PAGE_BODY))),), PAGE_BODY, 300.0)


def _inventory_row(key: str) -> dict[str, Any]:
    item_id = int(key)
    return {"item_id": item_id, "name": f"item #{item_id}", "price": 9.99, "stock": 42}


INVENTORY = FunctionSource("inventory", _inventory_row)


# -- one operation a workload --------------------------------------------------------------


@contextlib.contextmanager
def touch(url: str) -> Iterator[Loop]:
    """``tier.sessions.touch(token, item=...)``: last seen and a viewed item
    (with the view counted in the ranking)."""
    with tier_on(url) as tier:
        tokens, views = itertools.cycle(_sessions(tier)), itertools.cycle(VIEWS)
        yield _each(lambda t, v: tier.sessions.touch(t, item=v), zip(tokens, views, strict=False))


@contextlib.contextmanager
def check(url: str) -> Iterator[Loop]:
    """``tier.sessions.check(token)``."""
    with tier_on(url) as tier:
        yield _each(tier.sessions.check, _one_each(itertools.cycle(_sessions(tier))))


@contextlib.contextmanager
def cart_set(url: str) -> Iterator[Loop]:
    """``tier.carts.set(token, item, count)``: three items per cart, counts changing."""
    with tier_on(url) as tier:
        lines = zip(itertools.cycle(_sessions(tier)), itertools.cycle(VIEWS[:3]), itertools.count())
        yield _each(lambda t, i, n: tier.carts.set(t, i, 1 + n % 5), lines)


@contextlib.contextmanager
def counter_record(url: str) -> Iterator[Loop]:
    """``tier.counters.record(name, 1)`` over 1,000 names, 7 precisions each."""
    with tier_on(url) as tier:
        yield _each(tier.counters.record, _one_each(itertools.cycle(NAMES)))


@contextlib.contextmanager
def stats_record(url: str) -> Iterator[Loop]:
    """``tier.stats.record(context, "AccessTime", seconds)`` over 1,000 contexts."""
    with tier_on(url) as tier:
        pairs = zip(itertools.cycle(CONTEXTS), itertools.cycle(TIMES))
        yield _each(lambda c, v: tier.stats.record(c, ACCESS_TIME, v), pairs)


@contextlib.contextmanager
def page_hit(url: str) -> Iterator[Loop]:
    """``tier.pagecache.serve(plan, render)`` of 300 cached item pages: one GET each."""
    with tier_on(url) as tier:
        plans = []
        for item in range(PAGES):
            tier.ranking.record_view(str(item))  # in the top items: admitted
            request = PageRequest.from_url(f"http://shop.test/item?item={item}")
            plan = BOOK_RULES.plan(tier.config, request)
            if plan is None:
                raise RuntimeError("the book's rules do not cache item pages")
            tier.pagecache.serve(plan, Call(_rendered))  # stores it
            plans.append(plan)

        def hit(plan: Any) -> None:
            if tier.pagecache.serve(plan, Call(_refuse)).outcome != "HIT":
                raise RuntimeError("a cached page was not a hit")

        yield _each(hit, _one_each(itertools.cycle(plans)))


def _refuse() -> Rendered:
    raise RuntimeError("a cached page was rendered again")


@contextlib.contextmanager
def row_read(url: str) -> Iterator[Loop]:
    """``tier.rows.get(source, id)`` of 1,000 cached rows."""
    with tier_on(url) as tier:
        for row_id in range(1, ROWS + 1):
            tier.rows.get(INVENTORY, row_id, load=True)
        ids = itertools.cycle(range(1, ROWS + 1))
        yield _each(partial(tier.rows.get, INVENTORY), _one_each(ids))


@contextlib.contextmanager
def view(url: str) -> Iterator[Loop]:
    """``tier.ranking.record_view(item)``, items drawn from a Zipf law."""
    with tier_on(url) as tier:
        yield _each(tier.ranking.record_view, _one_each(itertools.cycle(VIEWS)))


# -- a shop's mix --------------------------------------------------------------------------


@contextlib.contextmanager
def mixed(url: str) -> Iterator[Loop]:
    """A page request as a shop makes it, cycled: check the session, touch it
    with the viewed item, read the item's row, serve the cached page, count
    the page, time it; every tenth request also changes a cart line."""
    with (
        touch(url) as touches,
        check(url) as checks,
        row_read(url) as rows,
        page_hit(url) as pages,
        counter_record(url) as counts,
        stats_record(url) as timings,
        cart_set(url) as carts,
    ):
        # Each part has a client of its own (a web process would share one).
        # Each part's step runs PER_STEP operations: one step of each is ten
        # page requests, with one step of cart changes every ten of those.
        parts = [checks, touches, rows, pages, counts, timings]
        turn = itertools.count()

        def step() -> None:
            for part in parts:
                part.step()
            if next(turn) % 10 == 0:
                carts.step()

        # 6 parts x 10 operations, and 10 cart changes every tenth step: 61 a
        # step, 6.1 a page request: the capacity model's SHOP_MIX.
        yield Loop(step, len(parts) * PER_STEP + PER_STEP // 10)


# A page request of the mixed workload, as the capacity model's SHOP_MIX says.
MIXED_OPERATIONS_PER_HIT = sum(capacity.SHOP_MIX.values())


# The hot operations, under the capacity model's names, whose costs it takes.
OPERATIONS: dict[str, Callable[[str], contextlib.AbstractContextManager[Loop]]] = {
    capacity.TOUCH: touch,
    capacity.CHECK: check,
    capacity.CART_SET: cart_set,
    capacity.COUNTER_RECORD: counter_record,
    capacity.STATS_RECORD: stats_record,
    capacity.PAGE_HIT: page_hit,
    capacity.ROW_READ: row_read,
    capacity.ITEM_VIEW: view,
}
MIXED = "mixed: a shop's page requests"
WORKLOADS = {**OPERATIONS, MIXED: mixed}
