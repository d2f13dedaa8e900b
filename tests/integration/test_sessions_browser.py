"""The session cookie's attributes as a real browser applies them: Debian's
Chromium, headless, driven by Playwright (no browser download).

The shop is mounted at ``/shop`` of an app served by uvicorn twice, over
https (a self-signed certificate made with openssl) and over plain http.
Chromium resolves ``shop.test`` and ``evil.test`` to 127.0.0.1: a real host
name (so plain http is not a secure context) and a cross-site attacker.
Skips only when Chromium is not installed (and fails then in CI).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route

import webtier
from tests.helpers.web import COOKIE, starlette_shop, uvicorn_serving
from webtier.testing import RedisServer

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason="Debian's chromium is not installed"
)


async def echo(request: Request) -> Response:
    """Tells whether the request carried the session cookie."""
    return PlainTextResponse("cookie: yes" if COOKIE in request.cookies else "cookie: no")


def evil_page(shop: str) -> Any:
    async def page(request: Request) -> Response:
        return HTMLResponse(
            f"""<form id=post method=post action="{shop}/shop/echo"><button>go</button></form>
            <a id=link href="{shop}/shop/echo">link</a>"""
        )

    return page


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[str, str]:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=shop.test", "-addext", "subjectAltName=DNS:shop.test",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return str(key), str(cert)


@contextlib.contextmanager
def shop_servers(server: RedisServer, prefix: str, certificate: tuple[str, str]) -> Iterator[Any]:
    """The app over https and over http: (https port, http port). Each
    server has a Redis client of its own, connected and closed in its loop."""

    def app(evil_target: str) -> Starlette:
        client = webtier.connect_async(server.url)
        tier = webtier.AsyncWebTier(client, webtier.Config(prefix=prefix))

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            yield
            await client.aclose()

        shop = starlette_shop(tier)
        shop.router.routes.append(Route("/echo", echo, methods=["GET", "POST"]))
        strict = starlette_shop(tier, insecure_local_http=False)  # Secure even locally
        return Starlette(
            routes=[
                Mount("/shop", app=shop),
                Mount("/strict", app=strict),
                Route("/echo", echo),
                Route("/evil", evil_page(evil_target)),
            ],
            lifespan=lifespan,
        )

    key, cert = certificate
    with uvicorn_serving(app(""), ssl_keyfile=key, ssl_certfile=cert) as https:
        secure_port = https.rsplit(":", 1)[1]
        with uvicorn_serving(app(f"https://shop.test:{secure_port}")) as http:
            yield secure_port, http.rsplit(":", 1)[1]


def test_the_session_cookie_in_a_real_browser(
    servers: dict[str, RedisServer], prefix: str, certificate: tuple[str, str]
) -> None:
    from playwright.sync_api import sync_playwright

    with (
        shop_servers(servers["standalone"], prefix, certificate) as (tls, plain),
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--host-resolver-rules=MAP shop.test 127.0.0.1, MAP evil.test 127.0.0.1"],
        )
        context = browser.new_context(ignore_https_errors=True)
        page = context.new_page()
        shop, insecure = f"https://shop.test:{tls}", f"http://shop.test:{plain}"

        def fetch(path: str, method: str = "GET") -> str:
            text: str = page.evaluate(
                "([p, m]) => fetch(p, {method: m}).then(r => r.text())", [path, method]
            )
            return text

        def ours() -> list[Any]:
            return [c for c in context.cookies() if c["name"] == COOKIE]

        # Browsing sets no cookie.
        page.goto(f"{shop}/shop/home")
        assert fetch("/shop/me").startswith('{"user":null')
        assert ours() == []

        # The first write does: HttpOnly, Secure, SameSite=Lax, Path=/shop.
        fetch("/shop/view/book", "POST")
        [cookie] = ours()
        assert cookie["httpOnly"] is True
        assert cookie["secure"] is True
        assert cookie["sameSite"] == "Lax"
        assert cookie["path"] == "/shop"
        assert cookie["domain"] == "shop.test"
        # Scripts cannot read it (though they can read other cookies).
        page.evaluate("document.cookie = 'visible=1; path=/'")
        assert page.evaluate("document.cookie") == "visible=1"
        # Sent under its path only.
        assert fetch("/shop/echo") == "cookie: yes"
        assert fetch("/echo") == "cookie: no"

        # Never sent over plain http; a Secure cookie from plain http is refused.
        page.goto(f"{insecure}/shop/echo")
        assert page.text_content("body") == "cookie: no"
        with page.expect_response(lambda r: r.url.endswith("/shop/view/pen")) as sent:
            fetch("/shop/view/pen", "POST")  # a new session's cookie, over http to a real name
        assert "secure" in (sent.value.header_value("set-cookie") or "").lower()
        assert [c["value"] for c in ours()] == [cookie["value"]]

        # SameSite=Lax: a cross-site POST comes without it, a link with it.
        page.goto(f"http://evil.test:{plain}/evil")
        page.click("#post button")
        page.wait_for_url(f"{shop}/shop/echo")
        assert page.text_content("body") == "cookie: no"
        page.goto(f"http://evil.test:{plain}/evil")
        page.click("#link")
        page.wait_for_url(f"{shop}/shop/echo")
        assert page.text_content("body") == "cookie: yes"

        # Login rotates the cookie; logout removes it from the browser.
        fetch("/shop/login/ann", "POST")
        [rotated] = ours()
        assert rotated["value"] != cookie["value"]
        assert '"user":"ann"' in fetch("/shop/me")
        fetch("/shop/logout", "POST")
        assert ours() == []

        # Local development, with the default options: plain http to a
        # loopback host gets a cookie without Secure, and the login holds.
        for host in ("127.0.0.1", "localhost"):
            page.goto(f"http://{host}:{plain}/shop/home")
            fetch("/shop/login/ann", "POST")
            [local] = [c for c in ours() if c["domain"] == host]
            assert (local["secure"], local["httpOnly"]) == (False, True)
            assert '"user":"ann"' in fetch("/shop/me")
            page.goto(f"http://{host}:{plain}/shop/me")
            assert '"user":"ann"' in (page.text_content("body") or "")
        # Asked to, Secure goes everywhere, loopback included.
        page.goto(f"http://127.0.0.1:{plain}/strict/home")
        with page.expect_response(lambda r: r.url.endswith("/strict/view/book")) as sent:
            fetch("/strict/view/book", "POST")
        assert "secure" in (sent.value.header_value("set-cookie") or "").lower()

        browser.close()
