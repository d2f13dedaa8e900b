"""The Django adapter of the session middleware, on a real Django app served
over HTTP by Werkzeug's server, on every Redis target."""

from __future__ import annotations

import contextlib
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
from tests.conftest import BINARIES
from tests.integration.sessionhelp import serving
from tests.integration.sessionshop import described, visit
from webtier.config import RetryPolicy
from webtier.testing import RedisServer

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="only-for-these-tests",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=["webtier.web.sessions_django.SessionMiddleware"],
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
