"""The Django views of ``webtier bench sessions --frameworks`` (its
ROOT_URLCONF): one seeds the session, one reads it and changes one key, one
reads it and changes nothing, one touches no session (the framework alone)."""

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


def read(request: HttpRequest) -> HttpResponse:
    return HttpResponse(str(request.session.get("n", 0)))


def plain(request: HttpRequest) -> HttpResponse:
    return HttpResponse("plain")


urlpatterns = [path("seed", seed), path("touch", touch), path("read", read), path("plain", plain)]
