"""The demo shop served for tests: a real uvicorn on a free loopback port,
a real Redis, a real SQL database (webtier.demo.shop)."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import httpx
import sqlalchemy as sa

import webtier
from tests.helpers.web import uvicorn_serving
from webtier.demo import shopdb
from webtier.demo.shop import ShopSettings, create_app

ITEMS = 300  # items in a test's inventory: 1..300
TOKEN = re.compile(r'name="csrftoken" value="([^"]+)"')
CHECKOUT_KEY = re.compile(r'name="checkout" value="([^"]*)"')


STOCK = 100  # units of every item in a test's inventory


def stocked(engine: sa.Engine, items: int = ITEMS) -> sa.Engine:
    """The shop's tables with items 1..``items``, :data:`STOCK` of each."""
    shopdb.create(engine, items)
    with engine.begin() as conn:
        conn.execute(shopdb.inventory.update().values(stock=STOCK))
    return engine


@contextlib.contextmanager
def serving(
    redis_url: str,
    prefix: str,
    engine: sa.Engine | str,
    config: webtier.Config | None = None,
    **settings: Any,
) -> Iterator[str]:
    """The shop on ``redis_url`` under ``prefix`` (and ``config``), serving
    until the block ends; yields its base URL. Its Redis client is closed
    after the app's lifespan."""
    client = webtier.connect_async(redis_url)
    config = dataclasses.replace(config or webtier.Config(), prefix=prefix)
    tier = webtier.AsyncWebTier(client, config)
    options = {"items": ITEMS, "secret": b"s" * 32, "view_flush": 0.1, **settings}
    shop = create_app(tier, engine, settings=ShopSettings(**options))
    with uvicorn_serving(_Closing(shop, client)) as url:
        yield url


class _Closing:
    """The shop's ASGI app, with its Redis client closed after its lifespan."""

    def __init__(self, app: Any, client: Any) -> None:
        self.app, self.client = app, client

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def closing_send(message: Any) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                await self.client.aclose()
            await send(message)

        await self.app(scope, receive, closing_send)


def browser(url: str) -> httpx.Client:
    """A client of the shop at ``url`` that keeps its cookies, as a browser."""
    return httpx.Client(base_url=url, timeout=10)


def token(page: httpx.Response) -> str:
    """The CSRF token of the page's first form."""
    found = TOKEN.search(page.text)
    assert found, f"no form with a CSRF token on {page.url}"
    return found.group(1)


def post(client: httpx.Client, page: str, action: str, **fields: Any) -> httpx.Response:
    """Submit a form of ``page`` to ``action`` as a browser would: the
    token from the page, the cookies kept."""
    shown = client.get(page)
    return client.post(action, data={"csrftoken": token(shown), **fields})


def checkout_form(client: httpx.Client) -> dict[str, str]:
    """The cart page's checkout form, as a browser submits it."""
    page = client.get("/cart")
    found = CHECKOUT_KEY.search(page.text)
    assert found, "no checkout form on the cart page"
    assert found.group(1), "no checkout key in the form"
    return {"csrftoken": token(page), "checkout": found.group(1)}


def order_of(answer: httpx.Response) -> int:
    """The order a checkout answered with (303 to ``/orders/N``)."""
    assert answer.status_code == 303, answer.text
    found = re.fullmatch(r"/orders/(\d+)", answer.headers["location"])
    assert found, answer.headers["location"]
    return int(found.group(1))
