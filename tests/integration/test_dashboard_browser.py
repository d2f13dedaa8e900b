"""The dashboard in a real browser (Debian's Chromium, headless, driven by
Playwright; no browser download): charts with data points while traffic
runs, new points without a reload, switching counter and precision, and
"Redis unreachable" on the panels when the test's own server stops; empty
panels saying why, before any traffic; at 1280 and 1920 px wide, no panel
overflowing and no time axis at the epoch (1970).
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


# 2001-09-09: a time axis starting before it shows an empty series at the epoch.
LONG_AGO = 1e9
DAY = 86_400  # longer than any chart's axis here (120 slices of 5 s, a few hours of stats)
WIDTHS = (1280, 1920)

# Every element of a panel whose right edge passes the panel's, as text.
OVERFLOWING = """panels => panels.flatMap(panel => {
  const edge = panel.getBoundingClientRect().right + 1;
  const out = [...panel.querySelectorAll("*")].filter(e => e.getBoundingClientRect().right > edge);
  return out.map(e => `${panel.id}: ${e.tagName} ${e.textContent.slice(0, 40)}`);
})"""


def check_layout(page: Any, shot: str) -> None:
    """At each of :data:`WIDTHS`: no panel overflows, no plotted chart's time
    axis starts at the epoch; a screenshot of each."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 1500})
        page.wait_for_timeout(300)  # a layout pass after the resize
        assert page.eval_on_selector_all(".panel", OVERFLOWING) == [], f"at {width} px"
        for chart in CHARTS:
            if points(page, chart):
                start = float(page.get_attribute(f"#{chart}", "data-xmin") or 0)
                end = float(page.get_attribute(f"#{chart}", "data-xmax") or 0)
                assert start > LONG_AGO, f"{chart}'s time axis starts at {start} at {width} px"
                assert end - start < DAY, f"{chart}'s time axis spans {end - start} s"
        page.screenshot(path=str(SHOTS / f"{shot}-{width}.png"), full_page=True)


def test_the_dashboard_live_in_a_browser(own_server: RedisServer) -> None:
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    config = traffic_config("dash")
    with mounted(own_server, config) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": WIDTHS[0], "height": 1500})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))

        # Before any traffic: every chart and table says why it is empty.
        page.goto(url)
        for chart in CHARTS:
            empty = f"#{chart} .empty"
            page.wait_for_selector(empty, timeout=20_000)
            assert page.text_content(empty), f"{chart} is empty without saying why"
            assert page.locator(f"#{chart} canvas").count() == 0, f"{chart} plots no data"
        for table in ("stats-rows", "item-rows", "worker-rows"):
            page.wait_for_selector(f"#{table} td.empty", timeout=20_000)
        assert "no worker alive" in (page.text_content("#worker-rows") or "")
        check_layout(page, "empty")
        page.set_viewport_size({"width": WIDTHS[0], "height": 1500})
        with traffic(own_server.url, config):
            time.sleep(2)  # a few seconds of traffic first
            _live(page, own_server)
        browser.close()
    assert not [p for p in problems if "503" not in p], problems


def _live(page: Any, own_server: RedisServer) -> None:
    """The panels while traffic runs, then with Redis stopped."""
    # Every chart gets data points.
    for chart in CHARTS:
        until(lambda chart=chart: points(page, chart) > 0, f"points in {chart}")
    page.wait_for_selector("#worker-rows td:not(.empty)", timeout=20_000)
    page.wait_for_selector("#stats-rows td:not(.empty)", timeout=20_000)
    option = page.text_content("#counter-names option") or ""
    assert " per 1 s" in option, f"a counter's count says what it counts: {option}"
    check_layout(page, "live")

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
