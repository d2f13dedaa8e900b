"""The shop under the load generator, served by uvicorn with its maintenance
jobs running: no 5xx, no order lost (the orders in SQL are exactly the
checkouts the shop acknowledged), stock never negative, and the live
sessions held to a small cap by the cleaner although more users log in.
On standalone Redis 240 visitors, and on the suite's Redis Cluster 160: a
fixed amount of work, each visit to its end however slow the machine."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa

import webtier
from tests.helpers.rows import set_stock
from tests.helpers.servers import wait_for
from tests.helpers.shop import serving
from webtier.demo import shopdb
from webtier.demo.loadgen import LoadReport, drive

pytestmark = [pytest.mark.slow, pytest.mark.needs_redis]

ITEMS = 2_000
SESSION_CAP = 10
USERS = 500  # many more than the cap: the cleaner has work
# The most popular items, with little stock: checkouts run them out (409s).
SCARCE = {1: 5, 2: 5, 3: 8}


@pytest.fixture
def engine(tmp_path: Path) -> sa.Engine:
    engine = sa.create_engine(f"sqlite:///{tmp_path}/shop.db")
    shopdb.create(engine, ITEMS)
    for item_id, stock in SCARCE.items():
        set_stock(engine, item_id, stock)
    return engine


def loaded(
    redis_url: str, prefix: str, engine: sa.Engine, *, rate: float, visitors: int
) -> LoadReport:
    """The shop on ``redis_url`` under the load of ``visitors``; returns once
    the cleaner has brought the live sessions back under the cap."""
    client = webtier.connect(redis_url)
    watcher = webtier.WebTier(client, webtier.Config(prefix=prefix))
    try:
        with serving(redis_url, prefix, engine, items=ITEMS, session_cap=SESSION_CAP) as base:
            report = asyncio.run(
                drive(
                    base,
                    rate=rate,
                    duration=None,
                    visitors=visitors,
                    users=USERS,
                    items=ITEMS,
                    seed=15,
                )
            )
            wait_for(
                lambda: watcher.sessions.stats().sessions <= SESSION_CAP,
                f"the shop's cleaner kept at most {SESSION_CAP} sessions",
            )
    finally:
        webtier.disconnect(client)
    return report


def assert_sound(report: LoadReport, engine: sa.Engine) -> None:
    assert report.status("5xx") == 0, report.as_dict()
    assert report.transport_errors == 0, report.as_dict()
    # Every form was accepted: the CSRF token read from each page was right.
    assert report.code(403) == 0, [(r.route, r.codes) for r in report.routes if 403 in r.codes]
    for route in ("POST /login", "POST /cart"):
        figures = report.route(route)
        assert figures is not None
        assert figures.statuses["3xx"] == figures.requests > 0, figures.codes
    # No order lost, none made up: SQL holds exactly the acknowledged ones.
    assert report.checkouts_cut_off == 0
    assert report.checkouts > 0
    with engine.connect() as conn:
        placed = set(conn.scalars(sa.select(shopdb.orders.c.order_id)))
        lowest = conn.scalar(sa.select(sa.func.min(shopdb.inventory.c.stock)))
    assert len(report.order_ids) == report.checkouts
    assert placed == set(report.order_ids)
    assert lowest is not None
    assert lowest >= 0
    # More visitors logged in than the cap holds sessions.
    logins = report.route("POST /login")
    assert logins is not None
    assert logins.requests > SESSION_CAP


@pytest.mark.onlynoncluster
def test_the_shop_under_load(redis_url: str, prefix: str, engine: sa.Engine) -> None:
    report = loaded(redis_url, prefix, engine, rate=8, visitors=240)
    assert_sound(report, engine)
    # Item pages are the bulk of the traffic, as in a shop.
    items = report.route("GET /item/{item_id}")
    assert items is not None
    assert items.requests > report.requests / 3


@pytest.mark.onlycluster
def test_the_shop_under_load_on_cluster(redis_url: str, prefix: str, engine: sa.Engine) -> None:
    report = loaded(redis_url, prefix, engine, rate=20, visitors=160)
    assert_sound(report, engine)
