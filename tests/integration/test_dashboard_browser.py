"""The dashboard in a real browser (Debian's Chromium, headless, driven by
Playwright; no browser download): charts with data points while traffic
runs, new points without a reload, switching counter and precision, and
"Redis unreachable" on the panels when the test's own server stops.
Screenshots go to artifacts/screenshots/dashboard/ (kept by CI).
Skips only when Chromium is not installed (and fails then in CI)."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import webtier
from tests.helpers.dashboard import traffic, traffic_config
from tests.helpers.servers import BINARIES
from tests.helpers.web import uvicorn_serving
from webtier.testing import RedisServer
from webtier.web.dashboard import dashboard

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots" / "dashboard"
CHARTS = ("counter-chart", "pagecache-chart", "cleaner-chart", "context-chart")
HEALTH_PANELS = ("pagecache", "sessions", "rows", "workers", "items")

pytestmark = [
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK), reason="Debian's chromium is not installed"
    ),
    pytest.mark.slow,
]


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A server this test may stop."""
    server = RedisServer.start(BINARIES["standalone"])
    yield server
    server.stop()


@contextlib.contextmanager
def mounted(server: RedisServer, config: webtier.Config) -> Iterator[str]:
    """The dashboard mounted at /dashboard of an app served by uvicorn, as a
    shop would; its client is made and closed in uvicorn's loop."""
    client = webtier.connect_async(server.url)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await client.aclose()

    tier = webtier.AsyncWebTier(client, config)
    app = Starlette(routes=[Mount("/dashboard", dashboard(tier))], lifespan=lifespan)
    with uvicorn_serving(app) as base:
        yield f"{base}/dashboard/"


def until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Polls from Python: the page's CSP (no eval) forbids wait_for_function."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.1)


def points(page: Any, chart: str) -> int:
    return int(page.get_attribute(f"#{chart}", "data-points") or 0)


def last_point(page: Any, chart: str) -> float:
    return float(page.get_attribute(f"#{chart}", "data-last") or 0)


def test_the_dashboard_live_in_a_browser(own_server: RedisServer) -> None:
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    config = traffic_config("dash")
    with (
        traffic(own_server.url, config),
        mounted(own_server, config) as url,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1500})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        time.sleep(2)  # a few seconds of traffic first
        page.goto(url)

        # Every chart gets data points.
        for chart in CHARTS:
            until(lambda chart=chart: points(page, chart) > 0, f"points in {chart}")
        page.wait_for_selector("#worker-rows tr", timeout=20_000)
        page.wait_for_selector("#stats-rows tr", timeout=20_000)
        page.screenshot(path=str(SHOTS / "live.png"), full_page=True)

        # New points arrive without a reload (1 s precision: within seconds).
        first = last_point(page, "counter-chart")
        until(lambda: last_point(page, "counter-chart") > first, "a new point")

        # Several counters overlaid, at another precision.
        names = page.eval_on_selector_all("#counter-names option", "os => os.map(o => o.value)")
        chosen = [n for n in names if n.startswith("views:")][:3]
        page.select_option("#counter-names", chosen)
        page.select_option("#precision", "5")
        legend = page.locator("#counter-chart .u-legend .u-series")
        until(lambda: legend.count() == len(chosen), f"the overlaid counters {chosen}", 10)
        assert points(page, "counter-chart") > 0
        page.screenshot(path=str(SHOTS / "overlaid-5s.png"), full_page=True)

        # A slowest page links to its chart.
        page.click("#slowest-list a")
        until(lambda: "per" in (page.text_content("#context-title") or ""), "its chart", 10)

        # Redis stops: each panel says so, the page stays up.
        own_server.stop()
        for panel in ("counters", "stats", *HEALTH_PANELS):
            status = f"#{panel} .status"
            until(lambda s=status: page.text_content(s) == "Redis unreachable", f"{panel} says so")
        page.screenshot(path=str(SHOTS / "redis-unreachable.png"), full_page=True)
        browser.close()
    assert not [p for p in problems if "503" not in p], problems
