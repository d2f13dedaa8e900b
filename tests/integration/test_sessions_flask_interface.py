"""``flask.session`` on webtier (``app.session_interface =
webtier.web.sessions.flask.SessionInterface(tier)``). Flask-Session's
source distribution ships no tests: each test here names the test or code
of pallets-eco/flask-session (tests/, src/flask_session/base.py) whose
behaviour it checks of a backend."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import flask
import pytest
import redis.connection

import webtier
from tests.helpers.servers import BINARIES
from tests.helpers.web import lost_updates, serving
from webtier.config import RetryPolicy, SessionSettings
from webtier.errors import ConfigError
from webtier.sessions.store import place_of
from webtier.testing import RedisServer
from webtier.web.sessions.flask import SessionInterface
from webtier.web.sessions.flask_interface import FlaskSession

PARALLEL = 200  # requests per client in the lost-update test, two clients at once


def create_app(tier: webtier.WebTier, **config: Any) -> flask.Flask:
    """Flask-Session's tests/conftest.py ``create_app``, on webtier."""
    app = flask.Flask(__name__)
    app.config.update({"SESSION_PERMANENT": False, **config})
    app.session_interface = SessionInterface(tier)

    @app.get("/")
    def hello() -> str:
        return "hello world"

    @app.post("/set")
    def set_value() -> str:
        flask.session["value"] = flask.request.form["value"]
        return "value set"

    @app.post("/modify")
    def modify() -> str:
        flask.session["value"] = flask.request.form["value"]
        return "value set"

    @app.post("/delete")
    def delete() -> str:
        del flask.session["value"]
        return "value deleted"

    @app.get("/get")
    def get() -> str:
        return str(flask.session.get("value", "no value set"))

    @app.post("/login")
    def login() -> str:
        app.session_interface.regenerate(flask.session)  # type: ignore[attr-defined]
        flask.session["user"] = "ann"
        return "in"

    @app.post("/clear")
    def clear() -> str:
        flask.session.clear()
        return "cleared"

    @app.get("/put/<name>")
    def put(name: str) -> str:
        flask.session[name] = 1
        time.sleep(0.002)  # the view's own work (a query, a template) before the save
        return "put"

    @app.get("/keys")
    def keys() -> list[str]:
        return sorted(flask.session.keys())

    return app


@pytest.fixture
def tier(sync_client: Any, config: webtier.Config) -> webtier.WebTier:
    return webtier.WebTier(sync_client, config)


def _sid(response: Any) -> str:
    (cookie,) = [c for c in response.headers.getlist("Set-Cookie") if c.startswith("session=")]
    return str(cookie.split(";")[0].split("=", 1)[1])


def test_a_value_is_set_modified_and_deleted_across_requests(tier: webtier.WebTier) -> None:
    """Mirrors flask-session tests/conftest.py ``Utils.test_session`` (run by
    tests/test_redis.py::TestRedisSession::test_redis_default)."""
    client = create_app(tier).test_client()
    assert client.get("/get").data not in [b"42", b"43", b"44"]
    response = client.get("/")
    assert "Vary" not in response.headers  # the session was not touched
    assert client.post("/set", data={"value": "42"}).data == b"value set"
    assert client.get("/get").data == b"42"
    assert client.get("/get").headers["Vary"] == "Cookie"
    assert client.post("/modify", data={"value": "43"}).data == b"value set"
    assert client.get("/get").data == b"43"
    assert client.post("/delete").data == b"value deleted"
    assert client.get("/get").data == b"no value set"


def test_a_request_that_leaves_its_session_alone_sets_no_cookie_and_no_vary(
    tier: webtier.WebTier,
) -> None:
    """A page that does not read ``flask.session`` is the same for every
    visitor: a cache may keep it (the page cache's holes need that)."""
    client = create_app(tier, SESSION_PERMANENT=True).test_client()
    client.post("/set", data={"value": "42"})
    response = client.get("/")
    assert "Vary" not in response.headers
    assert "Set-Cookie" not in response.headers
    assert client.get("/get").data == b"42"


@pytest.mark.parametrize(
    "read",
    [
        lambda s: s["value"],
        lambda s: s.get("value"),
        lambda s: "value" in s,
        lambda s: list(s),
        lambda s: len(s),
        lambda s: s.keys(),
        lambda s: s.values(),
        lambda s: s.items(),
        lambda s: s.copy(),
        lambda s: dict(s),
        lambda s: bool(s),
    ],
    ids=lambda read: str(read.__code__.co_firstlineno),
)
def test_every_read_of_the_session_marks_it_accessed(read: Any) -> None:
    """Flask's own session marks three reads (``[]``, ``get``,
    ``setdefault``); a page may show any other: it must vary on Cookie too
    (Flask 3.1 marks any use of ``flask.session`` itself, 3.0 does not)."""
    session = FlaskSession({"value": 1}, "a" * 43, permanent=True, saved={"value": "1"})
    assert not session.accessed
    read(session)
    assert session.accessed
    assert not session.modified


def flask_login_app(tier: webtier.WebTier) -> flask.Flask:
    """An app with flask-login's LoginManager, whose after-request hook
    looks for its remember-me flag in every request's session."""
    import flask_login

    app = create_app(tier, SESSION_PERMANENT=True, SECRET_KEY="k" * 32)
    logins = flask_login.LoginManager(app)

    @logins.user_loader
    def load(user_id: str) -> flask_login.UserMixin:
        user = flask_login.UserMixin()
        user.id = user_id  # type: ignore[attr-defined]
        return user

    @app.post("/remembered")
    def remembered() -> str:
        user = flask_login.UserMixin()
        user.id = "ann"  # type: ignore[attr-defined]
        flask_login.login_user(user, remember=True)
        return "in"

    @app.get("/me")
    def me() -> str:
        return str(flask_login.current_user.get_id())

    @app.get("/hooked")
    def hooked() -> str:
        return "the same for everyone"

    @app.after_request
    def reads_after_the_view(response: flask.Response) -> flask.Response:
        if flask.request.path == "/hooked":
            response.headers["X-Value"] = str(flask.session.get("value"))
        return response

    return app


@pytest.mark.parametrize("visitor", ["anonymous", "with a session"])
def test_flask_logins_look_after_the_view_leaves_the_page_free_of_the_session(
    tier: webtier.WebTier, visitor: str
) -> None:
    """flask-login's after-request hook reads ``"_remember" in session`` on
    every request: that alone adds no ``Vary: Cookie`` and no cookie, so a
    page whose view leaves the session alone may be cached (it was never
    stored before: every response of a flask-login app varied on Cookie)."""
    client = flask_login_app(tier).test_client()
    if visitor != "anonymous":
        client.post("/set", data={"value": "42"})
    page = client.get("/")
    assert page.data == b"hello world"
    assert "Vary" not in page.headers
    assert "Set-Cookie" not in page.headers


def test_a_read_by_the_view_or_by_another_hook_still_varies(tier: webtier.WebTier) -> None:
    client = flask_login_app(tier).test_client()
    client.post("/set", data={"value": "42"})
    assert client.get("/get").headers["Vary"] == "Cookie"  # the view read it
    hooked = client.get("/hooked")  # a hook read a key of its own, after the view
    assert hooked.headers["X-Value"] == "42"
    assert hooked.headers["Vary"] == "Cookie"
    # A login that asks to be remembered: the hook's flag sets flask-login's
    # cookie, read and removed after the view: the response varies.
    login = client.post("/remembered")
    assert login.headers["Vary"] == "Cookie"
    assert any(c.startswith("remember_token=") for c in login.headers.getlist("Set-Cookie"))
    me = client.get("/me")  # current_user reads the session in the view
    assert me.data == b"ann"
    assert me.headers["Vary"] == "Cookie"


def test_the_cookie_names_the_stored_session(tier: webtier.WebTier) -> None:
    """Mirrors flask-session tests/conftest.py ``Utils.test_session_with_cookie``
    and test_redis.py::TestRedisSession::test_redis_default's look at the store."""
    client = create_app(tier).test_client()
    sid = _sid(client.post("/set", data={"value": "44"}))
    stored = tier.session_store.read(sid)
    assert stored is not None
    assert stored.data["value"] == "44"


def test_session_permanent_false_gives_a_browser_session(
    tier: webtier.WebTier, sync_client: Any
) -> None:
    """Mirrors flask-session tests/conftest.py ``create_app``'s
    ``SESSION_PERMANENT = False`` (and base.py ``open_session``'s ``permanent``)."""
    browser = create_app(tier, PERMANENT_SESSION_LIFETIME=600).test_client()
    response = browser.post("/set", data={"value": "1"})
    cookie = response.headers["Set-Cookie"].lower()
    assert "expires" not in cookie
    assert "httponly" in cookie
    lasting = create_app(tier, SESSION_PERMANENT=True, PERMANENT_SESSION_LIFETIME=600)
    assert (
        "expires"
        in lasting.test_client().post("/set", data={"value": "1"}).headers["Set-Cookie"].lower()
    )
    # Either way Redis ends the stored session PERMANENT_SESSION_LIFETIME after its last save.
    where = place_of(tier.config, _sid(response))
    assert where is not None
    assert 590_000 < sync_client.pttl(where.key) <= 600_000


def test_regenerate_gives_a_new_id_and_kills_the_old_one(tier: webtier.WebTier) -> None:
    """Mirrors flask-session src/flask_session/base.py
    ``ServerSideSessionInterface.regenerate``, called at login."""
    client = create_app(tier).test_client()
    before = _sid(client.post("/set", data={"value": "cart"}))
    after = _sid(client.post("/login"))
    assert after != before
    assert tier.session_store.read(before) is None
    assert client.get("/get").data == b"cart"  # the data carried over
    stolen = create_app(tier).test_client()
    stolen.set_cookie("session", before)
    assert "user" not in stolen.get("/keys").json


def test_only_a_webtier_tier_is_accepted() -> None:
    """Mirrors flask-session tests/test_basic.py::test_null_session (an
    interface without a store fails when made, not at the first request)."""
    with pytest.raises(ConfigError):
        SessionInterface(object())  # type: ignore[arg-type]


def test_an_unknown_or_forged_cookie_starts_a_new_session_under_a_new_id(
    tier: webtier.WebTier,
) -> None:
    """Mirrors flask-session base.py ``open_session``: a saved session that
    does not exist gives a new session with a new id (never the offered one)."""
    client = create_app(tier).test_client()
    for offered in ("1", "someunknownkey", webtier.sessions.new_token()):
        client.set_cookie("session", offered)
        assert client.get("/get").data == b"no value set"
        assert _sid(client.post("/set", data={"value": "1"})) != offered
        assert tier.session_store.read(offered) is None


def test_an_emptied_session_is_deleted_and_its_cookie_cleared(tier: webtier.WebTier) -> None:
    """Mirrors flask-session base.py ``save_session``: "If the session was
    deleted (empty and modified), delete the saved session"."""
    client = create_app(tier).test_client()
    sid = _sid(client.post("/set", data={"value": "1"}))
    response = client.post("/clear")
    assert "session=;" in response.headers["Set-Cookie"]
    assert tier.session_store.read(sid) is None


def test_a_session_ended_elsewhere_is_never_saved_back(tier: webtier.WebTier) -> None:
    client = create_app(tier).test_client()
    sid = _sid(client.post("/set", data={"value": "1"}))
    app = create_app(tier)
    with app.test_request_context(headers={"Cookie": f"session={sid}"}):
        session = app.session_interface.open_session(app, flask.request)
        tier.session_store.delete(sid)  # "log out everywhere" meanwhile
        session["value"] = "2"
        response = app.make_response("late")
        app.session_interface.save_session(app, session, response)
    assert tier.session_store.read(sid) is None
    assert "session=;" in response.headers["Set-Cookie"]


def test_a_request_costs_one_round_trip_and_one_more_when_it_writes(
    tier: webtier.WebTier, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted on the wire: each pipeline is one ``send_packed_command``."""
    sent = []
    send = redis.connection.AbstractConnection.send_packed_command

    def counted(conn: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(command)
        return send(conn, command, *args, **kwargs)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    client = create_app(tier).test_client()
    client.post("/set", data={"value": "1"})
    client.post("/modify", data={"value": "2"})  # the scripts are loaded from here on
    for path, trips in (("/nothing-here", 1), ("/get", 1), ("/get", 1)):
        sent.clear()
        client.get(path)
        assert len(sent) == trips, path  # Flask opens the session of every request
    sent.clear()
    client.post("/modify", data={"value": "3"})
    assert len(sent) == 2  # the read, and the changed key's save
    sent.clear()
    client.post("/modify", data={"value": "3"})
    assert len(sent) == 1  # the same value: nothing to save


def test_while_redis_is_away_reads_are_anonymous_and_writes_get_503(prefix: str) -> None:
    with RedisServer.start(BINARIES["standalone"]) as server:
        client = webtier.connect(server.url, socket_timeout=0.5)
        retry = RetryPolicy(attempts=2, backoff=0.01, backoff_cap=0.05)
        tier = webtier.WebTier(client, webtier.Config(prefix=prefix, retry=retry))
        http = create_app(tier).test_client()
        http.post("/set", data={"value": "42"})
        server.kill()
        assert http.get("/").status_code == 200
        response = http.get("/get")
        assert (response.status_code, response.data) == (200, b"no value set")
        response = http.post("/set", data={"value": "43"})
        assert response.status_code == 503
        assert b"session store" in response.data
        assert response.headers["Retry-After"] == "5"
        server.launch()
        # The killed server lost its data: the old cookie reads as missing, and writes work.
        assert http.post("/set", data={"value": "44"}).status_code == 200
        assert http.get("/get").data == b"44"
        webtier.disconnect(client)


@pytest.mark.slow
def test_parallel_requests_changing_different_keys_keep_every_change(
    sync_client: Any, config: webtier.Config
) -> None:
    """flask-session#71: Flask-Session saves the whole session, so a request
    overwrites what a parallel one wrote since it read; webtier saves the
    keys each request changed."""
    limits = SessionSettings(max_fields=4 * PARALLEL, max_data_bytes=64 * 1024)
    tier = webtier.WebTier(sync_client, dataclasses.replace(config, sessions=limits))
    with serving(create_app(tier)) as base:
        assert lost_updates(base, "session", PARALLEL) == 0
