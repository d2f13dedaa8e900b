"""The Django adapter of the session middleware, on a real Django app served
over HTTP by Werkzeug's server, on every Redis target."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import django
import httpx
import pytest
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.http import require_POST

import webtier
from tests.faults.figures import FIGURES
from tests.helpers.servers import BINARIES
from tests.helpers.web import described, serving, visit
from webtier.config import RetryPolicy
from webtier.testing import RedisCluster, RedisServer

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="only-for-these-tests",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=["webtier.web.sessions.django.Middleware"],
        INSTALLED_APPS=[],
        USE_TZ=True,
    )
    django.setup()


def home(request: HttpRequest) -> HttpResponse:
    return HttpResponse("home")


def me(request: Any) -> HttpResponse:
    s = request.webtier_session
    return JsonResponse(described(s.user(), s.data(), s.cart(), s.recently_viewed()))


@require_POST
def view(request: Any, item: str) -> HttpResponse:
    request.webtier_session.record_view(item)
    return HttpResponse("viewed")


@require_POST
def add(request: Any, item: str, count: int) -> HttpResponse:
    request.webtier_session.set_cart(item, count)
    return HttpResponse("added")


@require_POST
def remember(request: Any, name: str, value: str) -> HttpResponse:
    request.webtier_session.update({name: value})
    return HttpResponse("remembered")


@require_POST
def login(request: Any, user: str) -> HttpResponse:
    request.webtier_session.login(user)
    return HttpResponse("welcome")


@require_POST
def logout(request: Any) -> HttpResponse:
    request.webtier_session.logout()
    return HttpResponse("bye")


urlpatterns = [
    path("home", home),
    path("me", me),
    path("view/<str:item>", view),
    path("cart/<str:item>/<int:count>", add),
    path("data/<str:name>/<str:value>", remember),
    path("login/<str:user>", login),
    path("logout", logout),
]


@contextlib.contextmanager
def django_serving(tier: webtier.WebTier, **options: Any) -> Iterator[str]:
    settings.WEBTIER_SESSIONS = {"tier": tier, **options}
    with serving(WSGIHandler()) as base:  # loads the middleware with these settings
        yield base


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


# -- outages: a 503, never Django's 500 page -------------------------------------------------

RETRY = RetryPolicy(attempts=2, backoff=0.01, backoff_cap=0.05)


def outage_answers(http: httpx.Client, cookie: str) -> dict[str, int]:
    """Status of each kind of request while Redis is away: the page that
    needs no session, reads and writes of the session."""
    return {
        "home": http.get("/home").status_code,
        "me": http.get("/me", headers={"cookie": cookie}).status_code,
        "view": http.post("/view/42", headers={"cookie": cookie}).status_code,
        "cart": http.post("/cart/hat/2", headers={"cookie": cookie}).status_code,
        "login": http.post("/login/ann", headers={"cookie": cookie}).status_code,
        "anonymous write": http.post("/data/theme/dark").status_code,
    }


DOWN = {"home": 200, "me": 503, "view": 503, "cart": 503, "login": 503, "anonymous write": 503}


@pytest.mark.faults
@pytest.mark.slow  # a Cluster of its own, nodes killed or stopped: CI only
def test_a_django_shop_with_the_whole_cluster_down_answers_503_never_500(prefix: str) -> None:
    with RedisCluster.start(BINARIES["standalone"], replicas=0) as cluster:
        client = webtier.connect(cluster.url, socket_timeout=0.5)
        tier = webtier.WebTier(client, webtier.Config(prefix=prefix, retry=RETRY))
        with django_serving(tier) as base, httpx.Client(base_url=base) as http:
            cookie = http.post("/cart/book/1").headers["set-cookie"].split(";")[0]
            for server in cluster.servers:
                server.kill()
            began = time.monotonic()
            assert outage_answers(http, cookie) == DOWN
            assert time.monotonic() - began < 10
        webtier.disconnect(client)


@pytest.mark.faults
@pytest.mark.parametrize("fault", ["kill", "sigstop"])
def test_a_django_shop_recovers_when_its_server_comes_back(prefix: str, fault: str) -> None:
    # Killed, the server refuses connections; stopped, it hangs them: the
    # middleware's time limit (1 s an operation) answers 503 in time.
    with RedisServer.start(BINARIES["standalone"], "--appendonly", "yes") as server:
        client = webtier.connect(server.url)  # 5 s socket timeout: only the limit helps
        tier = webtier.WebTier(client, webtier.Config(prefix=prefix))
        with django_serving(tier) as base, httpx.Client(base_url=base, timeout=30) as http:
            cookie = http.post("/cart/book/1").headers["set-cookie"].split(";")[0]
            assert process_of(server) is not None
            if fault == "kill":
                server.kill()
            else:
                os.kill(process_of(server), signal.SIGSTOP)
            try:
                began = time.monotonic()
                me = http.get("/me", headers={"cookie": cookie})
                assert me.status_code == 503
                assert time.monotonic() - began < 1.0 * 2.5  # the read, then the timing record
                assert me.headers["retry-after"] == "5"
                if fault == "kill":  # hung, each answer takes its second: a few will do
                    assert outage_answers(http, cookie) == DOWN
                else:
                    assert http.get("/home").status_code == 200
                    assert http.post("/cart/hat/2", headers={"cookie": cookie}).status_code == 503
            finally:
                if fault == "kill":
                    server.launch()  # its AOF: the session is back
                else:
                    os.kill(process_of(server), signal.SIGCONT)
            lifted = time.monotonic()
            while http.get("/me", headers={"cookie": cookie}).status_code != 200:
                assert time.monotonic() - lifted < 10, "the shop did not recover"
                time.sleep(0.01)
            FIGURES.add(
                capability="django",
                fault="kill-9+restart" if fault == "kill" else "sigstop",
                recovery={"me": time.monotonic() - lifted},
                outcomes={},
                invariant={},
                losses=[],
                notes={},
            )
            assert http.get("/me", headers={"cookie": cookie}).json()["cart"] == {"book": 1}
        webtier.disconnect(client)


def process_of(server: RedisServer) -> int:
    assert server.process is not None
    return server.process.pid
