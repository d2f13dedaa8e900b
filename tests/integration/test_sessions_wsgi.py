"""The WSGI session middleware on real apps served over HTTP by Werkzeug's
server: Flask, a plain WSGI app, and Django through its adapter, on every
Redis target."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

import webtier
from tests.helpers.servers import BINARIES, all_keys
from tests.helpers.web import KEY, flask_shop, serving, set_cookies, visit
from webtier.config import RetryPolicy
from webtier.testing import RedisServer
from webtier.web import sessions


@pytest.fixture
def stier(sync_client: Any, config: webtier.Config) -> webtier.WebTier:
    return webtier.WebTier(sync_client, config)


@pytest.mark.anyio
async def test_a_shopper_visits_a_flask_shop(
    stier: webtier.WebTier, redis_url: str, prefix: str
) -> None:
    with serving(flask_shop(stier, insecure_local_http=True, signing_keys=[KEY])) as base:
        async with httpx.AsyncClient(base_url=base) as http:
            await http.get("/home")
            assert all_keys(redis_url, f"{prefix}:*") == []
            await visit(http, secure=False)


def test_flask_cookies_are_secure_but_in_local_development(stier: webtier.WebTier) -> None:
    with serving(flask_shop(stier)) as base:
        response = httpx.post(f"{base}/view/book")  # http://127.0.0.1
        assert "secure" not in response.headers["set-cookie"].lower()
        response = httpx.post(f"{base}/view/book", headers={"Forwarded": "proto=https"})
        assert "secure" in response.headers["set-cookie"].lower()
    with serving(flask_shop(stier, insecure_local_http=False)) as base:
        response = httpx.post(f"{base}/view/book")
        assert "secure" in response.headers["set-cookie"].lower()


def test_any_wsgi_app_finds_its_session_in_the_environ(stier: webtier.WebTier) -> None:
    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        session = sessions.session_of(environ)
        session.update({"seen": "yes"})
        start_response("200 OK", [("Content-Type", "text/plain"), ("Cache-Control", "public")])
        return [str(session.data()).encode()]

    with serving(sessions.WSGIMiddleware(app, stier, path="/app")) as base:
        response = httpx.get(f"{base}/anything")
        assert response.text == "{'seen': 'yes'}"
        assert "path=/app" in response.headers["set-cookie"].lower()
        # A response carrying a new session token is never cached by others.
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["vary"] == "Cookie"


# -- outages -----------------------------------------------------------------------------------


@pytest.fixture
def down_tier(prefix: str) -> Iterator[tuple[webtier.WebTier, RedisServer]]:
    with RedisServer.start(BINARIES["standalone"]) as server:
        client = webtier.connect(server.url, socket_timeout=0.5)
        retry = RetryPolicy(attempts=2, backoff=0.01, backoff_cap=0.05)
        yield webtier.WebTier(client, webtier.Config(prefix=prefix, retry=retry)), server
        webtier.disconnect(client)


def test_a_flask_view_needing_the_session_during_an_outage_gets_503(
    down_tier: tuple[webtier.WebTier, RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    tier, server = down_tier
    with serving(flask_shop(tier)) as base, httpx.Client(base_url=base) as http:
        cookie = http.post("/cart/book/1").headers["set-cookie"].split(";")[0]
        server.kill()
        with caplog.at_level(logging.WARNING, logger="webtier.sessions"):
            for _ in range(3):
                assert http.get("/home").status_code == 200
                response = http.get("/me", headers={"cookie": cookie})
                assert response.status_code == 503
                assert response.headers["retry-after"] == "5"
                assert "session store" in response.text
                assert set_cookies(response.headers) == []
        assert len([r for r in caplog.records if r.name == "webtier.sessions"]) == 1
        server.launch()


def test_a_plain_wsgi_app_raising_the_outage_gets_503(
    down_tier: tuple[webtier.WebTier, RedisServer],
) -> None:
    tier, server = down_tier

    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])  # replaced by the 503
        return [str(sessions.session_of(environ).user()).encode()]

    server.kill()
    with serving(sessions.WSGIMiddleware(app, tier)) as base:
        token = "A" * 43
        response = httpx.get(base, headers={"cookie": f"webtier_session={token}"})
        assert response.status_code == 503
        assert "Traceback" not in response.text
    server.launch()


def test_anonymous_on_outage_for_flask(down_tier: tuple[webtier.WebTier, RedisServer]) -> None:
    tier, server = down_tier
    shop = flask_shop(tier, on_outage="anonymous")
    with serving(shop) as base, httpx.Client(base_url=base) as http:
        cookie = http.post("/cart/book/1").headers["set-cookie"].split(";")[0]
        server.kill()
        response = http.get("/me", headers={"cookie": cookie})
        assert response.status_code == 200
        assert response.json()["cart"] == {}
        assert http.post("/data/a/b", headers={"cookie": cookie}).status_code == 503
        server.launch()


def test_parallel_requests_of_one_session_lose_no_write(stier: webtier.WebTier) -> None:
    # Flask-Session's complaint: each request saves the whole session it
    # read, so of two parallel requests the last one erases the other's write.
    writers = 16
    with serving(flask_shop(stier, insecure_local_http=True)) as base:
        cookie = httpx.post(f"{base}/data/first/1").headers["set-cookie"].split(";")[0]
        start = threading.Barrier(writers)

        def write(n: int) -> int:
            with httpx.Client(base_url=base, headers={"cookie": cookie}, timeout=60) as http:
                start.wait(timeout=60)
                return http.post(f"/data/field{n}/{n}").status_code

        with ThreadPoolExecutor(writers) as pool:
            assert set(pool.map(write, range(writers))) == {200}
        data = httpx.get(f"{base}/me", headers={"cookie": cookie}).json()["data"]
        assert data == {"first": "1", **{f"field{n}": str(n) for n in range(writers)}}
