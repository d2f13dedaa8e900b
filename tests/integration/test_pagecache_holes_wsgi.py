"""Holes in cached pages through the WSGI page cache, in a Flask app with
webtier's session middleware around it: the same promises as the ASGI
layer's (tests/integration/test_pagecache_holes.py), on the sync tier."""

from __future__ import annotations

from collections.abc import Iterator

import flask
import pytest

import webtier
from tests.helpers.web import cookie_value
from tests.helpers.wire import Wire
from webtier.pagecache import CacheRoute, PageRules
from webtier.pagecache.holes import Holes
from webtier.web.pagecache import flask as flask_pagecache
from webtier.web.sessions import flask as flask_sessions

KEY = b"k" * 32
COOKIE = "webtier_session"
RULES = PageRules(
    routes=(
        CacheRoute("/item/*", item_pages=True, item_in_path=True, holes=True),
        CacheRoute("/peek/*", item_pages=True, item_in_path=True, holes=True),
        # A message waiting in the session is shown (and forgotten) by a render.
        CacheRoute("/news", ttl=60, holes=True, render_for=lambda visit: "notice" in visit.data),
    )
)
HOLES = Holes(
    {
        "who": lambda visit: visit.user or "guest",
        "cart": lambda visit: visit.cart_units,
        "seen": lambda visit: ",".join(visit.viewed),
    }
)


def page(item: str, extra: str = "") -> str:
    mark = HOLES.mark
    return f"<p>{mark('who')}|{mark('cart')}|{mark('seen')}</p><h1>{item}</h1>{'x' * 2000}{extra}"


class Shop:
    def __init__(self, tier: webtier.WebTier) -> None:
        self.renders = 0
        app = flask.Flask("holes")

        @app.get("/item/<item>")
        def item(item: str) -> str:
            self.renders += 1
            return page(item)

        @app.get("/peek/<item>")
        def peek(item: str) -> str:
            self.renders += 1
            return page(item, f"<b>{flask_sessions.current_session().user()}</b>")

        @app.get("/news")
        def news() -> str:
            # The visitor's notice, taken: only a visitor with a session asks.
            self.renders += 1
            notice = ""
            if COOKIE in flask.request.cookies:
                session = flask_sessions.current_session()
                notice = session.get("notice", "")
                if notice:
                    session.discard("notice")
            return page("news", f"<i>{notice}</i>")

        @app.post("/notice")
        def notice() -> str:
            flask_sessions.current_session().update({"notice": "your order shipped"})
            return "noted"

        @app.post("/login/<user>")
        def login(user: str) -> str:
            session = flask_sessions.current_session()
            session.login(user)
            session.set_cart("book", 2)
            return "in"

        self.cache = flask_pagecache.install(app, tier, RULES, holes=HOLES, item_views=True)
        flask_sessions.install(app, tier, signing_keys=[KEY])  # around the page cache
        self.client = app.test_client(use_cookies=False)  # each request names its visitor

    def login(self, user: str) -> str:
        response = self.client.post(f"/login/{user}")
        (cookie,) = response.headers.getlist("set-cookie")
        return cookie_value(cookie)

    def get(self, path: str, token: str | None = None, **headers: str) -> flask.Response:
        if token is not None:
            headers["cookie"] = f"{COOKIE}={token}"
        return self.client.get(path, headers=headers)


@pytest.fixture
def tier(redis_url: str, config: webtier.Config) -> Iterator[webtier.WebTier]:
    with webtier.open(redis_url, config=config) as sync_tier:
        yield sync_tier


@pytest.fixture
def shop(tier: webtier.WebTier) -> Iterator[Shop]:
    tier.ranking.record_view("1")
    tier.ranking.record_view("2")
    made = Shop(tier)
    yield made
    made.cache.close()


def test_each_visitor_gets_their_own_holes_in_one_round_trip(
    shop: Shop, tier: webtier.WebTier, monkeypatch: pytest.MonkeyPatch
) -> None:
    wire = Wire(monkeypatch)
    ann, bob = shop.login("ann"), shop.login("bob")
    first = shop.get("/item/1", ann)
    assert first.headers["x-cache"] == "MISS"
    assert first.text.startswith("<p>ann|2|1</p>")
    with wire.counting() as trips:
        hit = shop.get("/item/1", bob)
    assert hit.headers["x-cache"] == "HIT"
    assert hit.text.startswith("<p>bob|2|1</p>")
    assert trips() == 1
    assert "set-cookie" not in hit.headers  # a hit sets no cookie
    anonymous = shop.get("/item/1")
    assert anonymous.text.startswith("<p>guest|0|</p>")
    assert shop.renders == 1
    assert tier.sessions.recently_viewed(bob.split(".")[0]) == ["1"]


def test_a_render_that_reads_the_session_is_never_stored(shop: Shop) -> None:
    ann, bob = shop.login("ann"), shop.login("bob")
    assert "<b>ann</b>" in shop.get("/peek/1", ann).text
    theirs = shop.get("/peek/1", bob)
    assert "<b>bob</b>" in theirs.text
    assert "ann" not in theirs.text
    assert shop.renders == 2


def test_a_page_the_cache_may_not_answer_is_filled_all_the_same(shop: Shop) -> None:
    ann = shop.login("ann")
    answer = shop.get("/item/2", ann, **{"cache-control": "no-cache"})
    assert answer.text.startswith("<p>ann|2|2</p>")
    assert "webtier-hole" not in answer.text


def test_anonymous_views_of_cached_pages_count(shop: Shop, tier: webtier.WebTier) -> None:
    before = dict(tier.ranking.top(10))["2"]
    for _ in range(3):
        shop.get("/item/2")
    assert dict(tier.ranking.top(10))["2"] - before == 3


def test_holes_without_the_session_middleware_around_say_so(tier: webtier.WebTier) -> None:
    app = flask.Flask("alone")
    app.get("/item/<item>")(lambda item: page(item))
    flask_pagecache.install(app, tier, RULES, holes=HOLES)
    with pytest.raises(webtier.ConfigError, match="session middleware around it"):
        app.test_client().get("/item/1", headers={"cookie": f"{COOKIE}=x"})


def test_a_visitor_with_a_notice_gets_a_render_that_is_never_stored(shop: Shop) -> None:
    assert shop.get("/news").headers["x-cache"] == "MISS"  # stored for everyone
    ann = shop.login("ann")
    shop.client.post("/notice", headers={"cookie": f"{COOKIE}={ann}"})
    noticed = shop.get("/news", ann)
    assert noticed.headers["x-cache"] == "MISS"  # rendered for her, filled
    assert noticed.text.startswith("<p>ann|2|</p>")
    assert "your order shipped" in noticed.text
    assert shop.renders == 2
    again = shop.get("/news", ann)
    assert again.headers["x-cache"] == "HIT"  # the notice is gone: the shared page
    assert again.text.startswith("<p>ann|2|</p>")
    assert "your order shipped" not in again.text
    anonymous = shop.get("/news")
    assert anonymous.headers["x-cache"] == "HIT"
    assert anonymous.text.startswith("<p>guest|0|</p>")
    assert "your order shipped" not in anonymous.text
    assert shop.renders == 2


def test_a_render_of_one_visitors_page_leaves_the_page_to_the_next_render(shop: Shop) -> None:
    ann = shop.login("ann")
    theirs = shop.get("/news", ann)  # her handler read her session: hers alone
    assert theirs.headers["x-cache"] == "MISS"
    # No pass note left for the page: the next render, anonymous, is stored.
    assert shop.get("/news").headers["x-cache"] == "MISS"
    shared = shop.get("/news")
    assert shared.headers["x-cache"] == "HIT"
    assert "ann" not in shared.text
    assert shop.renders == 2
