"""A Django app over the session middleware's Django adapter, served over
HTTP by Werkzeug's server: the views of the session shop (see
:func:`tests.helpers.web.visit`). Importing this module configures Django."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import django
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.http import require_POST

import webtier
from tests.helpers.web import described, serving
from webtier.pagecache.holes import Holes

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


# A user of django.contrib.auth's kind, for auth.login (which needs no
# database: the user is never saved, as this Django has none).
from django.contrib.auth.base_user import AbstractBaseUser  # noqa: E402  (needs the settings)


class Shopper(AbstractBaseUser):  # type: ignore[django-manager-missing,misc]
    USERNAME_FIELD = "id"

    class Meta:
        app_label = "django_shop"


# The holes of the item pages (tests/integration/test_pagecache_holes_django.py).
HOLES = Holes({"who": lambda visit: visit.user or "guest", "cart": lambda visit: visit.cart_units})


def _page(body: str) -> HttpResponse:
    response = HttpResponse(body)
    response["Content-Length"] = str(len(response.content))  # as CommonMiddleware sets it
    return response


def item(request: Any, item: str) -> HttpResponse:
    return _page(f"<p>{HOLES.mark('who')}|{HOLES.mark('cart')}</p><h1>{item}</h1>")


def peek(request: Any, item: str) -> HttpResponse:
    # Reads the session outside any hole: the page is one visitor's.
    user = request.webtier_session.user()
    return _page(f"<p>{HOLES.mark('who')}</p><h1>{item}</h1><b>{user}</b>")


urlpatterns = [
    path("item/<str:item>", item),
    path("peek/<str:item>", peek),
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
