"""The shop's whole journey on the other targets: Redis Cluster (the
suite's 3+3 cluster), Redis Sentinel (its master, 2 replicas and 3
sentinels) and PostgreSQL. Browse, add to the cart, log in (the
cart merged), check out, see the new stock, see the flash sale refreshed
by the worker, log out."""

from __future__ import annotations

import re

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers.rows import set_stock
from tests.helpers.servers import wait_for
from tests.helpers.shop import STOCK, post, serving, stocked
from webtier.demo.shop import FLASH_SALE_ITEMS, catalog
from webtier.testing import RedisSentinel


def journey(url: str, engine: sa.Engine) -> None:
    with httpx.Client(base_url=url, timeout=10) as anonymous:
        assert anonymous.get("/item/2").headers["x-cache"] == "MISS"
        wait_for(lambda: anonymous.get("/item/2").headers["x-cache"] == "HIT", "a HIT")
    with httpx.Client(base_url=url, timeout=10) as client:
        post(client, "/item/2", "/cart", item="2", count="3")
        post(client, "/login", "/login", username="grace")
        assert "Welcome, grace." in client.get("/").text
        placed = post(client, "/cart", "/checkout")
        assert placed.status_code == 303
        order_id = int(placed.headers["location"].rsplit("/", 1)[1])
        assert client.get(f"/orders/{order_id}").status_code == 200
        stock = re.search(r'<dd id="stock">(\d+)</dd>', client.get("/item/2").text)
        assert stock
        assert int(stock.group(1)) == STOCK - 3
        with httpx.Client(base_url=url, timeout=10) as other:
            assert f'<dd id="stock">{STOCK - 3}</dd>' in other.get("/item/2").text
        # The worker refreshes the flash-sale rows from SQL every second.
        flash = FLASH_SALE_ITEMS[0]
        set_stock(engine, flash, 42)
        row = f'<a href="/item/{flash}">'
        wait_for(
            lambda: re.search(row + r".*?</td><td>42</td>", client.get("/flash-sale").text, re.S),
            "the flash sale refreshed",
        )
        assert post(client, "/", "/logout").status_code == 303
        assert "Log in" in client.get("/").text
    found = catalog.order(engine, order_id)
    assert found is not None
    assert found.username == "grace"
    assert found.items == 3


@pytest.mark.onlycluster
@pytest.mark.slow
@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_the_shop_on_redis_cluster(redis_url: str, prefix: str, database: sa.Engine) -> None:
    with serving(redis_url, prefix, stocked(database)) as url:
        journey(url, database)


@pytest.mark.slow
@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
def test_the_shop_on_postgresql(redis_url: str, prefix: str, database: sa.Engine) -> None:
    with serving(redis_url, prefix, stocked(database)) as url:
        journey(url, database)


@pytest.mark.slow
@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_the_shop_on_redis_sentinel(
    sentinel: RedisSentinel, prefix: str, database: sa.Engine
) -> None:
    with serving(sentinel.url, prefix, stocked(database)) as url:
        journey(url, database)
