"""Take the README's screenshot of the shop: docs/images/shop.png.

Runs ``webtier demo`` in a data directory of its own (its traffic fills
the "most viewed" shelf), logs a visitor in with an item in the cart, and
photographs the home page with Playwright and Debian's Chromium::

    python scripts/shop_screenshot.py
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "images" / "shop.png"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "XDG_DATA_HOME": folder, "PYTHONUNBUFFERED": "1"}
        demo = subprocess.Popen(
            [sys.executable, "-m", "webtier", "demo", "--port", "0", "--rate", "40"],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert demo.stdout is not None
            url = next(
                m.group(1) for line in demo.stdout if (m := re.search(r"at (http\S+)", line))
            )
            time.sleep(10)  # the traffic ranks some items
            photograph(url)
        finally:
            demo.send_signal(signal.SIGINT)
            demo.wait(60)
    print(f"wrote {TARGET.relative_to(ROOT)}")


def photograph(url: str) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1100, "height": 760})
        page.goto(f"{url}/item/42")
        with page.expect_navigation():
            page.click("form.buy button")  # the visitor's session starts here
        for item in (42, 7, 1):
            page.goto(f"{url}/item/{item}")  # recently viewed
        page.goto(f"{url}/login")
        page.fill("input[name=username]", "ada")
        with page.expect_navigation():
            page.click("form.stacked button")
        TARGET.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(TARGET))
        browser.close()


if __name__ == "__main__":
    main()
