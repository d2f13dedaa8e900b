"""The Django adapter of the session middleware, on a real Django app served
over HTTP by Werkzeug's server, on every Redis target."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import webtier
from tests.helpers.django_shop import django_serving
from tests.helpers.servers import BINARIES
from tests.helpers.web import visit
from webtier.config import RetryPolicy
from webtier.testing import RedisServer


@pytest.mark.anyio
async def test_a_shopper_visits_a_django_shop(sync_client: Any, config: webtier.Config) -> None:
    tier = webtier.WebTier(sync_client, config)
    with django_serving(tier, insecure_local_http=True) as base:
        async with httpx.AsyncClient(base_url=base) as http:
            await visit(http, secure=False)


def test_a_django_view_needing_the_session_during_an_outage_gets_503(prefix: str) -> None:
    with RedisServer.start(BINARIES["standalone"]) as server:
        client = webtier.connect(server.url, socket_timeout=0.5)
        retry = RetryPolicy(attempts=2, backoff=0.01, backoff_cap=0.05)
        tier = webtier.WebTier(client, webtier.Config(prefix=prefix, retry=retry))
        with django_serving(tier) as base, httpx.Client(base_url=base) as http:
            cookie = http.post("/cart/book/1").headers["set-cookie"].split(";")[0]
            server.kill()
            assert http.get("/home").status_code == 200
            response = http.get("/me", headers={"cookie": cookie})
            assert response.status_code == 503
            assert "session store" in response.text
            server.launch()
        webtier.disconnect(client)
