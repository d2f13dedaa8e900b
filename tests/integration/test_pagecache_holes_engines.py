"""Holes in cached pages for visitors whose session is the framework's own,
kept in webtier: Flask's ``flask.session`` (``SessionInterface``) and
Django's ``request.session`` (``SESSION_ENGINE``). The WSGI page cache
around the app reads the visitor's session from the framework's cookie
(``sessions=SessionOptions(cookie_name=...)``) in the page's round trip, as
for webtier's own cookie (tests/integration/test_pagecache_holes_wsgi.py);
a render that read the session is never stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import flask
import flask_login
import pytest
from django.conf import settings
from django.contrib import auth
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse
from django.test import override_settings
from django.urls import path
from django.views.decorators.http import require_POST
from werkzeug.test import Client

import webtier
from tests.helpers.django_shop import Shopper
from tests.helpers.wire import Wire
from webtier.pagecache import CacheRoute, PageRules
from webtier.pagecache.holes import Holes
from webtier.web.pagecache import WSGIMiddleware
from webtier.web.pagecache import flask as flask_pagecache
from webtier.web.sessions import SessionOptions
from webtier.web.sessions.flask import SessionInterface

RULES = PageRules(
    routes=(
        CacheRoute("/item/*", item_pages=True, item_in_path=True, holes=True),
        CacheRoute("/peek/*", item_pages=True, item_in_path=True, holes=True),
    )
)
HOLES = Holes(
    {
        "who": lambda visit: visit.user or "guest",
        "name": lambda visit: visit.data.get("name", "-"),
        "seen": lambda visit: ",".join(visit.viewed),
        "cart": lambda visit: visit.cart_units,
    }
)


def page(item: str, extra: str = "") -> str:
    mark = HOLES.mark
    holes = "|".join(mark(name) for name in ("who", "name", "seen", "cart"))
    return f"<p>{holes}</p><h1>{item}</h1>{'x' * 2000}{extra}"


class Shop(Protocol):
    """An app whose sessions are its framework's, behind the page cache:
    ``/login/<user>`` logs a user in (their name kept in the session),
    ``/item/<item>`` is the same for everyone but its holes, ``/peek/<item>``
    reads the session outside them."""

    renders: int

    def login(self, user: str) -> str:
        """The ``Cookie`` header of the user's new session."""

    def get(self, path: str, cookie: str | None = None) -> Any: ...


class FlaskShop:
    def __init__(self, tier: webtier.WebTier) -> None:
        self.renders = 0
        app = flask.Flask("engine-holes")
        app.session_interface = SessionInterface(tier)
        # flask-login's after_request hook looks for its remember-me flag in
        # every request's session: pages are stored all the same.
        logins = flask_login.LoginManager(app)
        logins.user_loader(self.user)

        @app.get("/item/<item>")
        def item(item: str) -> str:
            self.renders += 1
            return page(item)

        @app.get("/peek/<item>")
        def peek(item: str) -> str:
            self.renders += 1
            return page(item, f"<b>{flask.session.get('_user_id')}</b>")

        @app.post("/login/<user>")
        def login(user: str) -> str:
            app.session_interface.regenerate(flask.session)  # type: ignore[attr-defined]
            flask_login.login_user(self.user(user))
            flask.session["name"] = f"No. {user}"
            return "in"

        options = SessionOptions(cookie_name=app.config["SESSION_COOKIE_NAME"])
        self.cache = flask_pagecache.install(
            app, tier, RULES, holes=HOLES, sessions=options, item_views=True
        )
        self.client = app.test_client(use_cookies=False)  # each request names its visitor

    @staticmethod
    def user(user_id: str) -> flask_login.UserMixin:
        user = flask_login.UserMixin()
        user.id = user_id  # type: ignore[attr-defined]
        return user

    def login(self, user: str) -> str:
        return str(self.client.post(f"/login/{user}").headers["set-cookie"].split(";")[0])

    def get(self, path: str, cookie: str | None = None) -> Any:
        return self.client.get(path, headers={"cookie": cookie} if cookie else {})


class DjangoShop:
    """Django's session middleware and engine on webtier; auth.login."""

    def __init__(self, tier: webtier.WebTier) -> None:
        self.renders = 0
        self.urlpatterns = [
            path("login/<str:user>", require_POST(self.login_view)),
            path("item/<str:item>", self.item),
            path("peek/<str:item>", self.peek),
        ]
        self.settings = override_settings(
            ROOT_URLCONF=self,
            MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware"],
            SESSION_ENGINE="webtier.web.sessions.django",
            WEBTIER_SESSIONS={"tier": tier},
        )
        self.settings.enable()
        options = SessionOptions(cookie_name=settings.SESSION_COOKIE_NAME)
        self.cache = WSGIMiddleware(
            WSGIHandler(), tier, RULES, holes=HOLES, sessions=options, item_views=True
        )
        self.client = Client(self.cache, use_cookies=False)

    def login_view(self, request: HttpRequest, user: str) -> HttpResponse:
        backend = "django.contrib.auth.backends.ModelBackend"
        auth.login(request, Shopper(id=int(user)), backend=backend)
        request.session["name"] = f"No. {user}"
        return HttpResponse("in")

    def item(self, request: HttpRequest, item: str) -> HttpResponse:
        self.renders += 1
        return _sized(page(item))

    def peek(self, request: HttpRequest, item: str) -> HttpResponse:
        self.renders += 1
        return _sized(page(item, f"<b>{request.session.get(auth.SESSION_KEY)}</b>"))

    @staticmethod
    def user(user_id: str) -> flask_login.UserMixin:
        user = flask_login.UserMixin()
        user.id = user_id  # type: ignore[attr-defined]
        return user

    def login(self, user: str) -> str:
        return str(self.client.post(f"/login/{user}").headers["set-cookie"].split(";")[0])

    def get(self, path: str, cookie: str | None = None) -> Any:
        return self.client.get(path, headers={"cookie": cookie} if cookie else {})


def _sized(body: str) -> HttpResponse:
    response = HttpResponse(body)
    response["Content-Length"] = str(len(response.content))  # as CommonMiddleware sets it
    return response


@pytest.fixture
def tier(redis_url: str, config: webtier.Config) -> Iterator[webtier.WebTier]:
    with webtier.open(redis_url, config=config) as sync_tier:
        sync_tier.ranking.record_view("1")
        yield sync_tier


@pytest.fixture(params=["flask", "django"])
def shop(request: pytest.FixtureRequest, tier: webtier.WebTier) -> Iterator[Shop]:
    if request.param == "flask":
        made: FlaskShop | DjangoShop = FlaskShop(tier)
    else:
        made = DjangoShop(tier)
    yield made
    made.cache.close()
    if isinstance(made, DjangoShop):
        made.settings.disable()


def test_each_visitor_gets_their_own_holes_from_one_stored_page_in_one_round_trip(
    shop: Shop, tier: webtier.WebTier, monkeypatch: pytest.MonkeyPatch
) -> None:
    wire = Wire(monkeypatch)
    ann, bob = shop.login("7"), shop.login("8")
    tier.carts.set(bob.split("=", 1)[1], "book", 2)  # the app's cart, under the session's id
    first = shop.get("/item/1", ann)
    assert first.headers["x-cache"] == "MISS"
    # Its view counted before the hash is read, the script new to the
    # server (NOSCRIPT) or not.
    assert first.text.startswith("<p>7|No. 7|1|0</p>")
    with wire.counting() as trips:
        hit = shop.get("/item/1", bob)
    assert hit.headers["x-cache"] == "HIT"
    assert hit.text.startswith("<p>8|No. 8|1|2</p>")
    assert trips() == 1
    assert "set-cookie" not in hit.headers
    anonymous = shop.get("/item/1").text
    assert anonymous.startswith("<p>guest|-||0</p>")
    assert "No. " not in anonymous  # the stored page holds no visitor's byte
    assert shop.renders == 1
    assert tier.sessions.recently_viewed(bob.split("=", 1)[1]) == ["1"]


def test_a_render_that_reads_the_session_is_never_stored(shop: Shop) -> None:
    ann, bob = shop.login("7"), shop.login("8")
    mine = shop.get("/peek/1", ann)
    assert "<b>7</b>" in mine.text
    assert mine.headers["vary"] == "Cookie"
    theirs = shop.get("/peek/1", bob)
    assert theirs.headers["x-cache"] == "MISS"
    assert "<b>8</b>" in theirs.text
    assert "No. 7" not in theirs.text
    assert shop.renders == 2


def test_a_session_cookie_the_page_cache_would_not_count_private_is_refused(
    tier: webtier.WebTier,
) -> None:
    # Django's SESSION_COOKIE_NAME changed, private_cookies not: a request
    # carrying it would not be a visitor's (its pages never stored).
    with pytest.raises(webtier.ConfigError, match="'shop_sid' is not among"):
        WSGIMiddleware(
            lambda environ, start: [], tier, RULES, sessions=SessionOptions(cookie_name="shop_sid")
        )
