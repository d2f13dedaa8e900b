"""The shop in a real browser: Debian's Chromium, headless, driven by
Playwright (no browser download), through browse -> add to cart -> login
(cart merged, old cookie dead) -> the item page from the page cache with the
visitor's own name, cart and recently viewed -> checkout -> the item page shows the new
stock -> logout.

Each step's page is kept as a screenshot in ``artifacts/screenshots/shop/``
at the repository's root (CI keeps the folder); a step whose page shows an
error (a 4xx/5xx answer, the problem page) fails the test. Skips only when
Chromium is not installed (and fails then in CI).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers.servers import wait_for
from tests.helpers.shop import STOCK, serving, stocked

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots" / "shop"

pytestmark = [
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK), reason="Debian's chromium is not installed"
    ),
    pytest.mark.slow,
    pytest.mark.parametrize("database", ["sqlite"], indirect=True),
]


@pytest.fixture
def shop(redis_url: str, prefix: str, database: sa.Engine) -> Iterator[str]:
    with serving(redis_url, prefix, stocked(database)) as url:
        yield url


class Steps:
    """The browser's page, a screenshot of each step, and no error page."""

    def __init__(self, page: Any) -> None:
        self.page, self.taken = page, 0
        SHOTS.mkdir(parents=True, exist_ok=True)
        for old in SHOTS.glob("*.png"):
            old.unlink()

    def shot(self, name: str, response: Any = None) -> None:
        self.taken += 1
        self.page.screenshot(path=str(SHOTS / f"{self.taken:02d}-{name}.png"), full_page=True)
        if response is not None:
            assert response.status < 400, f"{name}: {response.status} at {response.url}"
        heading = self.page.locator("h1").first.inner_text()
        assert self.page.locator(".problem").count() == 0, f"{name}: error page {heading!r}"

    def cookie(self) -> str:
        cookies = self.page.context.cookies()
        return next(c["value"] for c in cookies if c["name"] == "webtier_session")


def test_a_visitor_buys_in_a_real_browser(shop: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1100, "height": 800})
        steps = Steps(page)

        steps.shot("home", page.goto(f"{shop}/"))
        steps.shot("item", page.goto(f"{shop}/item/17"))
        assert page.locator("#stock").inner_text() == str(STOCK)

        page.fill("input[name=count]", "2")
        with page.expect_navigation():
            page.click("form.buy button")
        steps.shot("cart")
        assert "Item 17: 2 in your cart." in page.locator(".notice").inner_text()
        anonymous = steps.cookie()

        steps.shot("login", page.goto(f"{shop}/login"))
        page.fill("input[name=username]", "heidi")
        with page.expect_navigation():
            page.click("form.stacked button")
        steps.shot("logged-in")
        assert "Welcome, heidi." in page.locator(".notice").inner_text()
        assert steps.cookie() != anonymous
        with httpx.Client(base_url=shop, cookies={"webtier_session": anonymous}) as replay:
            assert "Your cart is empty" in replay.get("/cart").text  # the old cookie is dead

        # The item page from the page cache, the same copy for everyone, with
        # this visitor's name, cart and recently viewed filled in.
        wait_for(
            lambda: page.goto(f"{shop}/item/17").headers.get("x-cache") == "HIT",
            "the item page from the page cache",
        )
        steps.shot("item-cached")
        assert page.locator("nav a[href='/account']").inner_text() == "heidi"
        assert page.locator("nav .badge").inner_text() == "2"
        assert page.locator("form.buy input[name=count]").input_value() == "2"
        assert "item 17" in page.locator("main p.muted").last.inner_text()
        with httpx.Client(base_url=shop) as stranger:
            theirs = stranger.get("/item/17")
            assert theirs.headers["x-cache"] == "HIT"
            assert "heidi" not in theirs.text
            assert "badge" not in theirs.text

        steps.shot("cart-after-login", page.goto(f"{shop}/cart"))
        assert page.locator("input[name=count][value='2']").count() == 1
        with page.expect_navigation():
            page.click("form.checkout button")
        steps.shot("order")
        assert page.locator("h1").inner_text().startswith("Order ")

        steps.shot("item-after-checkout", page.goto(f"{shop}/item/17"))
        assert page.locator("#stock").inner_text() == str(STOCK - 2)
        with httpx.Client(base_url=shop) as anonymous_visitor:  # the page cache agrees
            wait_for(
                lambda: (
                    f'<dd id="stock">{STOCK - 2}</dd>' in anonymous_visitor.get("/item/17").text
                ),
                "the new stock for anonymous visitors",
            )

        with page.expect_navigation():
            page.click("header form button")  # log out
        steps.shot("logged-out")
        assert page.locator("nav a[href='/login']").count() == 1
        browser.close()
