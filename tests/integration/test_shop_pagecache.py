"""The shop's item pages in the page cache: a page is stored only as the
item its path names, and a checkout drops every cached page of the item.
On the suite's standalone server and on Cluster."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers.servers import wait_for
from tests.helpers.shop import STOCK, checkout_form, order_of, post, serving, stocked

pytestmark = [
    pytest.mark.parametrize("database", ["sqlite"], indirect=True),
    pytest.mark.parametrize("target", ["standalone", "cluster"], indirect=True),
]


@pytest.fixture
def shop(redis_url: str, prefix: str, database: sa.Engine) -> Iterator[str]:
    with serving(redis_url, prefix, stocked(database)) as url:
        yield url


def stock_of(page: httpx.Response) -> int:
    found = re.search(r'<dd id="stock">(\d+)</dd>', page.text)
    assert found, page.text
    return int(found.group(1))


def cached(client: httpx.Client, path: str) -> None:
    wait_for(lambda: client.get(path).headers.get("x-cache") == "HIT", f"{path} cached")


def test_a_page_is_stored_as_its_own_item_and_a_checkout_drops_every_one(shop: str) -> None:
    pages = ("/item/2", "/item/2?item=2", "/item/2?x=1")
    with httpx.Client(base_url=shop, timeout=10) as anonymous:
        cached(anonymous, "/item/1")  # both items popular: both admitted
        for path in pages:
            cached(anonymous, path)
        for _ in range(3):
            alias = anonymous.get("/item/2?item=1")  # item 2's page, named as item 1's
            assert alias.status_code == 200
            assert "x-cache" not in alias.headers  # left to the app: never stored
            assert stock_of(alias) == STOCK
        with httpx.Client(base_url=shop, timeout=10) as buyer:
            post(buyer, "/item/2", "/cart", item="2", count="4")
            order_of(buyer.post("/checkout", data=checkout_form(buyer)))
        for path in pages:
            assert stock_of(anonymous.get(path)) == STOCK - 4, path
