"""A cart is taken once: concurrent and repeated checkouts of one session's
cart make one order and every answer names it, a Redis stall after the
order's commit cannot make a retry order again, an order follows its
session through a login, and a checkout drops every cached page of its
items (a page is stored only as the item its path names). On the suite's
standalone server and on Cluster (the session's keys, the page cache's
shards), over HTTP against the real shop (uvicorn, SQLite)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis.cluster
import sqlalchemy as sa

import webtier
from tests.helpers.rows import set_stock
from tests.helpers.servers import wait_for
from tests.helpers.shop import (
    CHECKOUT_KEY,
    STOCK,
    browser,
    checkout_form,
    order_of,
    post,
    serving,
    stocked,
    token,
)
from webtier.demo.shop import catalog

pytestmark = pytest.mark.parametrize("target", ["standalone", "cluster"], indirect=True)
SQLITE = pytest.mark.parametrize("database", ["sqlite"], indirect=True)


@pytest.fixture
def shop(redis_url: str, prefix: str, database: sa.Engine) -> Iterator[str]:
    with serving(redis_url, prefix, stocked(database)) as url:
        yield url


def submitted_at_once(url: str, cookies: httpx.Cookies, form: dict[str, str], n: int) -> list[Any]:
    """``n`` submissions of one form by one visitor, all in flight at once."""

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, cookies=cookies, timeout=30) as client:
            return await asyncio.gather(*(client.post("/checkout", data=form) for _ in range(n)))

    return asyncio.run(run())


# The key's claim waits for a concurrent one: SQLite's write lock, PostgreSQL's unique index.
@pytest.mark.parametrize("database", ["sqlite", "postgresql"], indirect=True)
def test_concurrent_checkouts_of_one_cart_make_one_order(shop: str, database: sa.Engine) -> None:
    with browser(shop) as client:
        post(client, "/item/5", "/cart", item="5", count="2")
        form = checkout_form(client)
        answers = submitted_at_once(shop, client.cookies, form, 8)
        orders = {order_of(answer) for answer in answers}
        assert len(orders) == 1, [a.status_code for a in answers]
        (order_id,) = orders
        assert client.get(f"/orders/{order_id}").status_code == 200
        assert "Your cart is empty" in client.get("/cart").text
    assert catalog.count_orders(database) == 1
    assert catalog.item(database, 5)["stock"] == STOCK - 2  # type: ignore[index]


@SQLITE
def test_a_repeated_checkout_answers_with_the_same_order(shop: str, database: sa.Engine) -> None:
    with browser(shop) as client:
        post(client, "/item/6", "/cart", item="6", count="1")
        form = checkout_form(client)
        first = order_of(client.post("/checkout", data=form))
        # The second click, the back button, a retry: the same order.
        assert order_of(client.post("/checkout", data=form)) == first
        assert order_of(client.post("/checkout", data=form)) == first
        assert catalog.count_orders(database) == 1
        # A new cart is a new checkout.
        post(client, "/item/6", "/cart", item="6", count="1")
        again = checkout_form(client)
        assert again["checkout"] != form["checkout"]
        second = order_of(client.post("/checkout", data=again))
        assert second != first
        assert client.get(f"/orders/{first}").status_code == 200
        assert client.get(f"/orders/{second}").status_code == 200
        # A form whose key the session never had orders nothing.
        post(client, "/item/7", "/cart", item="7", count="1")
        forged = {**checkout_form(client), "checkout": "not-a-key-of-this-session"}
        refused = client.post("/checkout", data=forged)
        assert refused.status_code == 409
        assert "out of date" in refused.text
    assert catalog.count_orders(database) == 2
    assert catalog.item(database, 6)["stock"] == STOCK - 2  # type: ignore[index]


def _pause_redis(url: str, milliseconds: int) -> None:
    """Every command of every client waits ``milliseconds`` (each master of a
    Cluster), from a connection of its own."""
    client = webtier.connect(url)
    try:
        if isinstance(client, redis.cluster.RedisCluster):
            client.execute_command(
                "CLIENT", "PAUSE", milliseconds, "ALL", target_nodes=client.get_primaries()
            )
        else:
            client.execute_command("CLIENT", "PAUSE", milliseconds, "ALL")
    finally:
        webtier.disconnect(client)


@pytest.mark.slow
@SQLITE
def test_a_redis_stall_at_the_commit_cannot_make_a_second_order(
    shop: str, database: sa.Engine, redis_url: str
) -> None:
    stalled = threading.Event()

    def stall_redis(conn: Any) -> None:
        # The order's transaction commits while Redis stands still: what the
        # request does next (the session, the caches) waits past its budget.
        if not stalled.is_set():
            stalled.set()
            _pause_redis(redis_url, 3000)

    with browser(shop) as client:
        post(client, "/item/8", "/cart", item="8", count="3")
        form = checkout_form(client)
        sa.event.listen(database, "commit", stall_redis)
        try:
            first = client.post("/checkout", data=form)
        finally:
            sa.event.remove(database, "commit", stall_redis)
        assert stalled.is_set()
        assert first.status_code == 503  # the order is placed, its answer lost
        assert catalog.count_orders(database) == 1
        # The visitor retries until the shop answers: the order, not a second.
        retried: list[httpx.Response] = []
        wait_for(
            lambda: (
                retried.append(client.post("/checkout", data=form))
                or retried[-1].status_code != 503
            ),
            "the shop back",
        )
        order_id = order_of(retried[-1])
        assert client.get(f"/orders/{order_id}").status_code == 200
        assert "Your cart is empty" in client.get("/cart").text
    assert catalog.count_orders(database) == 1
    assert catalog.item(database, 8)["stock"] == STOCK - 3  # type: ignore[index]


@SQLITE
def test_an_anonymous_order_is_still_yours_after_logging_in(shop: str) -> None:
    with browser(shop) as client:
        post(client, "/item/9", "/cart", item="9", count="1")
        order_id = order_of(client.post("/checkout", data=checkout_form(client)))
        assert client.get(f"/orders/{order_id}").status_code == 200
        post(client, "/login", "/login", username="heidi")
        assert client.get(f"/orders/{order_id}").status_code == 200
    with browser(shop) as other:  # another session of the same user: not placed by heidi
        post(other, "/login", "/login", username="heidi")
        assert other.get(f"/orders/{order_id}").status_code == 404


@pytest.mark.slow
@SQLITE
def test_sixty_checkouts_of_an_item_of_five_make_five_orders(
    shop: str, database: sa.Engine
) -> None:
    set_stock(database, 10, 5)

    async def ready_to_buy(client: httpx.AsyncClient) -> dict[str, str]:
        page = await client.get("/item/10")
        added = {"csrftoken": token(page), "item": "10", "count": "1"}
        assert (await client.post("/cart", data=added)).status_code == 303
        cart = await client.get("/cart")
        found = CHECKOUT_KEY.search(cart.text)
        assert found
        return {"csrftoken": token(cart), "checkout": found.group(1)}

    async def run() -> list[httpx.Response]:
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(httpx.AsyncClient(base_url=shop, timeout=60))
                for _ in range(60)
            ]
            forms = await asyncio.gather(*(ready_to_buy(c) for c in clients))
            return await asyncio.gather(
                *(c.post("/checkout", data=f) for c, f in zip(clients, forms, strict=True))
            )

    answers = asyncio.run(run())
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [303] * 5 + [409] * 55
    assert len({order_of(a) for a in answers if a.status_code == 303}) == 5
    assert catalog.count_orders(database) == 5
    assert catalog.item(database, 10)["stock"] == 0  # type: ignore[index]


def stock_of(page: httpx.Response) -> int:
    found = re.search(r'<dd id="stock">(\d+)</dd>', page.text)
    assert found, page.text
    return int(found.group(1))


def cached(client: httpx.Client, path: str) -> None:
    wait_for(lambda: client.get(path).headers.get("x-cache") == "HIT", f"{path} cached")


@SQLITE
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
