"""Holes in cached pages of a Django app, whose sessions are webtier's
Django middleware's (inside the app): the WSGI page cache around the app
reads the visitor's session from webtier's cookie itself, and a render
that read the session (``Vary: Cookie``, from that middleware) is never
stored."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from werkzeug.test import Client

import webtier
from tests.helpers import django_shop
from tests.helpers.wire import Wire
from webtier.pagecache import CacheRoute, PageRules
from webtier.web.pagecache import WSGIMiddleware
from webtier.web.sessions import SessionOptions

KEY = b"d" * 32
RULES = PageRules(
    routes=(
        CacheRoute("/item/*", item_pages=True, item_in_path=True, holes=True),
        CacheRoute("/peek/*", item_pages=True, item_in_path=True, holes=True),
    )
)


@pytest.fixture
def tier(redis_url: str, config: webtier.Config) -> Iterator[webtier.WebTier]:
    with webtier.open(redis_url, config=config) as sync_tier:
        sync_tier.ranking.record_view("1")
        yield sync_tier


@pytest.fixture
def client(tier: webtier.WebTier) -> Iterator[Client]:
    settings.WEBTIER_SESSIONS = {"tier": tier, "signing_keys": [KEY]}
    options = SessionOptions(signing_keys=[KEY])
    cache = WSGIMiddleware(WSGIHandler(), tier, RULES, holes=django_shop.HOLES, sessions=options)
    yield Client(cache, use_cookies=False)
    cache.close()


def login(client: Client, user: str) -> str:
    response = client.post(f"/login/{user}")
    client.post("/cart/book/2", headers={"cookie": response.headers["set-cookie"].split(";")[0]})
    return response.headers["set-cookie"].split(";")[0]


def test_a_django_page_is_cached_for_every_visitor_with_their_own_holes(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    wire = Wire(monkeypatch)
    ann, bob = login(client, "ann"), login(client, "bob")
    first = client.get("/item/1", headers={"cookie": ann})
    assert first.headers["x-cache"] == "MISS"
    assert first.text.startswith("<p>ann|2</p>")
    with wire.counting() as trips:
        hit = client.get("/item/1", headers={"cookie": bob})
    assert hit.headers["x-cache"] == "HIT"
    assert hit.text.startswith("<p>bob|2</p>")
    assert trips() == 1
    assert client.get("/item/1").text.startswith("<p>guest|0</p>")


def test_a_django_render_that_reads_the_session_is_never_stored(client: Client) -> None:
    ann, bob = login(client, "ann"), login(client, "bob")
    mine = client.get("/peek/1", headers={"cookie": ann})
    assert "<b>ann</b>" in mine.text
    theirs = client.get("/peek/1", headers={"cookie": bob})
    assert theirs.headers["x-cache"] == "MISS"
    assert "<b>bob</b>" in theirs.text
    assert "ann" not in theirs.text
