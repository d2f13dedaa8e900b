"""The Django views of ``webtier bench sessions --frameworks`` (its
ROOT_URLCONF): one seeds the session, the other reads it and changes one key."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

SEEDED = 10  # keys of the session besides the counter the request changes


def seed(request: HttpRequest) -> HttpResponse:
    for i in range(SEEDED):
        request.session[f"key{i}"] = f"value {i}"
    return HttpResponse("seeded")


def touch(request: HttpRequest) -> HttpResponse:
    count = request.session.get("n", 0) + 1
    request.session["n"] = count
    return HttpResponse(str(count))


urlpatterns = [path("seed", seed), path("touch", touch)]
