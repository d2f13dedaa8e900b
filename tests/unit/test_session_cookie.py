"""The session middlewares' shared core, with no server: cookie signing and
parsing, cookie attributes, options, and the session's flows fed replies by
hand."""

from __future__ import annotations

import secrets
import time
from types import SimpleNamespace
from typing import Any

import pytest

from tests.helpers import drive
from webtier.config import Config, SessionSettings
from webtier.errors import ConfigError, LateCookie, RedisUnavailable, UnknownSession
from webtier.web import _sessions as flows
from webtier.web._sessions import (
    Ask,
    OutageLog,
    SessionOptions,
    SessionState,
    Where,
    cookie_morsel,
    decode,
    encode,
    is_loopback,
    merge_headers,
)

KEY = b"k" * 32
OLD = b"o" * 32
TOKEN = secrets.token_urlsafe(32)
OTHER = ("y" if TOKEN[0] == "x" else "x") + TOKEN[1:]  # a token one character away
HTTPS = Where(mount="", scheme="https", host="shop.example")


def signed() -> SessionOptions:
    return SessionOptions(signing_keys=[KEY])


# -- signing and parsing -----------------------------------------------------------------------


def test_an_unsigned_cookie_carries_the_token() -> None:
    options = SessionOptions()
    assert encode(options, TOKEN) == TOKEN
    assert decode(options, f"a=1; webtier_session={TOKEN}; b=2").token == TOKEN


def test_a_signed_cookie_round_trips_and_a_rotated_key_still_verifies() -> None:
    value = encode(signed(), TOKEN)
    assert value.startswith(TOKEN + ".")
    assert decode(signed(), f"webtier_session={value}") == flows.Decoded(TOKEN, True, False)
    rotated = SessionOptions(signing_keys=[b"n" * 32, KEY])
    assert decode(rotated, f"webtier_session={value}") == flows.Decoded(TOKEN, True, True)


@pytest.mark.parametrize(
    "value",
    [
        "",
        TOKEN,  # unsigned where signing is on
        TOKEN + ".",
        TOKEN + "." + "A" * 43,  # a made-up signature
        OTHER + "." + encode(signed(), TOKEN).split(".")[1],  # another token's MAC
        TOKEN + "." + encode(signed(), TOKEN).split(".")[1] + "x",
        "../../etc." + "A" * 43,
        "a" * 5000,
    ],
)
def test_forged_or_garbled_signed_cookies_are_refused(value: str) -> None:
    found = decode(signed(), f"webtier_session={value}")
    assert found.token is None
    assert found.present


def test_a_value_signed_for_another_cookie_name_is_refused() -> None:
    other = SessionOptions(cookie_name="other", signing_keys=[KEY])
    value = encode(other, TOKEN)
    assert decode(signed(), f"webtier_session={value}").token is None


@pytest.mark.parametrize("value", ["short", TOKEN + "x", TOKEN[:-1] + "!", "a:b" * 20])
def test_unsigned_tokens_of_the_wrong_shape_are_refused(value: str) -> None:
    assert decode(SessionOptions(), f"webtier_session={value}").token is None


def test_no_cookie_header_or_no_cookie_of_ours() -> None:
    assert decode(SessionOptions(), None) == flows.Decoded(None, False)
    assert decode(SessionOptions(), "sessionid=abc") == flows.Decoded(None, False)


# -- attributes ----------------------------------------------------------------------------------


def attributes(options: SessionOptions, where: Where, value: str | None = TOKEN) -> set[str]:
    header = cookie_morsel(options, where, value).OutputString()
    return {part.strip().lower() for part in header.split(";")}


def test_the_cookie_is_httponly_secure_lax_and_scoped_to_the_mount() -> None:
    found = attributes(SessionOptions(), Where("/shop", "https", "shop.example"))
    assert found == {
        f"webtier_session={TOKEN}".lower(),
        "httponly",
        "secure",
        "samesite=lax",
        "path=/shop",
        f"max-age={14 * 24 * 3600}",
    }
    assert "path=/" in attributes(SessionOptions(), HTTPS)
    assert "path=/account" in attributes(SessionOptions(path="/account"), HTTPS)
    assert "domain=shop.example" in attributes(SessionOptions(domain="shop.example"), HTTPS)
    assert not any(a.startswith("max-age") for a in attributes(SessionOptions(max_age=None), HTTPS))


def test_a_deleted_cookie_expires_at_once() -> None:
    found = attributes(SessionOptions(), HTTPS, None)
    assert {"webtier_session=", "max-age=0", "secure", "httponly"} <= found


def test_secure_is_dropped_only_for_local_plain_http_when_asked() -> None:
    local = Where("", "http", "localhost:8000")
    assert "secure" in attributes(SessionOptions(), local)
    relaxed = SessionOptions(insecure_local_http=True)
    assert "secure" not in attributes(relaxed, local)
    assert "secure" not in attributes(relaxed, Where("", "http", "127.0.0.1:8000"))
    assert "secure" in attributes(relaxed, Where("", "http", "shop.example"))
    assert "secure" in attributes(relaxed, Where("", "https", "localhost"))


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("localhost", True),
        ("LOCALHOST:80", True),
        ("app.localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.1:5000", True),
        ("[::1]:8000", True),
        ("::1", True),
        ("shop.example", False),
        ("10.0.0.1", False),
        ("localhost.example", False),
        ("[2001:db8::1]", False),
        ("", False),
    ],
)
def test_loopback_hosts(host: str, local: bool) -> None:
    assert is_loopback(host) is local


@pytest.mark.parametrize(
    "settings",
    [
        {"cookie_name": "bad name;"},
        {"path": "shop"},
        {"same_site": "none"},
        {"signing_keys": [b"short"]},
        {"signing_keys": KEY},
        {"on_outage": "ignore"},
        {"max_age": 0},
        {"retry_after": -1},
    ],
)
def test_bad_options_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        SessionOptions(**settings)


def test_the_session_cache_control_replaces_the_responses() -> None:
    merged = merge_headers(
        [("Cache-Control", "public, max-age=600"), ("Content-Type", "text/html")],
        [("set-cookie", "x"), ("cache-control", "no-store")],
    )
    assert merged == [
        ("Content-Type", "text/html"),
        ("set-cookie", "x"),
        ("cache-control", "no-store"),
    ]


# -- flows fed replies by hand -------------------------------------------------------------------


def state(cookie: str | None = f"webtier_session={TOKEN}", **settings: Any) -> SessionState:
    return SessionState.from_cookie(SessionOptions(**settings), OutageLog(30), cookie)


def run(flow: flows.Flow[Any], replies: dict[str, Any]) -> tuple[Any, list[Ask]]:
    """Runs ``flow``, answering each call from ``replies`` by method name (an
    exception is raised into the flow)."""
    return drive(flow, lambda ask: replies[f"{ask.part}.{ask.method}"])


def info(user: str | None = "ann", idle: float = 0.0) -> Any:
    now = time.time()
    return SimpleNamespace(user=user, created=now - 100, last_seen=now - idle)


def test_an_anonymous_visitor_reads_without_any_call_and_gets_no_cookie() -> None:
    anonymous = state(None)
    for flow in (flows.user, flows.data, flows.cart, flows.recently_viewed, flows.clear_cart):
        value, asked = run(flow(anonymous), {})
        assert asked == []
        assert not value
    assert anonymous.response_headers(HTTPS) == [("vary", "Cookie")]


def test_the_first_write_creates_the_session_and_sets_its_cookie() -> None:
    fresh = state(None)
    _, asked = run(flows.set_cart(fresh, "book", 2), {"sessions.new": TOKEN, "carts.set": None})
    assert asked == [Ask("sessions", "new"), Ask("carts", "set", (TOKEN, "book", 2))]
    headers = dict(fresh.response_headers(HTTPS))
    assert headers["set-cookie"].startswith(f"webtier_session={TOKEN};")
    assert headers["cache-control"] == "no-store"


def test_a_live_session_is_read_once_and_touched_only_when_idle_long_enough() -> None:
    live = state()
    assert run(flows.user(live), {"sessions.info": info()}) == (
        "ann",
        [Ask("sessions", "info", (TOKEN,))],
    )
    assert run(flows.user(live), {}) == ("ann", [])  # read once per request
    idle = state()
    _, asked = run(flows.user(idle), {"sessions.info": info(idle=61), "sessions.touch": True})
    assert asked[-1] == Ask("sessions", "touch", (TOKEN,))
    assert idle.response_headers(HTTPS) == [("vary", "Cookie")]  # same cookie


def test_a_dead_sessions_cookie_is_left_alone() -> None:
    # It may be the one a concurrent login just rotated: deleting it could
    # delete the new one.
    dead = state()
    asked = [Ask("sessions", "info", (TOKEN,))]
    assert run(flows.data(dead), {"sessions.info": None}) == ({}, asked)
    assert dead.response_headers(HTTPS) == [("vary", "Cookie")]


def test_a_cookie_signed_with_an_old_key_is_signed_again() -> None:
    old_value = encode(SessionOptions(signing_keys=[OLD]), TOKEN)
    rotated = state(f"webtier_session={old_value}", signing_keys=[KEY, OLD])
    run(flows.user(rotated), {"sessions.info": info()})
    cookie = dict(rotated.response_headers(HTTPS))["set-cookie"]
    assert cookie.startswith(f"webtier_session={encode(signed(), TOKEN)};")


def test_login_rotates_the_token_and_logout_clears_the_cookie() -> None:
    live = state()
    new = secrets.token_urlsafe(32)
    result = SimpleNamespace(token=new, cart_changes={})
    value, asked = run(
        flows.login(live, "bob"), {"sessions.info": info(None), "sessions.login": result}
    )
    assert value is result
    assert asked[-1] == Ask("sessions", "login", (TOKEN, "bob"), {"cart_policy": "add"})
    assert run(flows.user(live), {}) == ("bob", [])
    _, asked = run(flows.logout(live), {"sessions.logout": None})
    assert asked == [Ask("sessions", "logout", (new,))]
    assert run(flows.user(live), {}) == (None, [])
    assert dict(live.response_headers(HTTPS))["set-cookie"].startswith("webtier_session=;")


def test_login_without_a_session_makes_one_for_the_user() -> None:
    fresh = state(None)
    value, asked = run(flows.login(fresh, "ann"), {"sessions.new": TOKEN})
    assert (value, asked) == (None, [Ask("sessions", "new", (), {"user": "ann"})])


def test_the_cookie_cannot_change_once_the_headers_went_out() -> None:
    late = state(None)
    late.response_headers(HTTPS)
    with pytest.raises(LateCookie):
        run(flows.login(late, "ann"), {})
    with pytest.raises(LateCookie):
        run(flows.update(late, {"a": 1}), {})


def test_an_outage_fails_closed_by_default() -> None:
    live = state()
    down = RedisUnavailable("down")
    with pytest.raises(RedisUnavailable):
        run(flows.user(live), {"sessions.info": down})
    # Not remembered as anonymous: the next read tries again.
    assert run(flows.user(live), {"sessions.info": info()})[0] == "ann"


def test_an_outage_serves_an_anonymous_visitor_when_asked() -> None:
    live = state(on_outage="anonymous")
    down = RedisUnavailable("down")
    assert run(flows.user(live), {"sessions.info": down})[0] is None
    assert run(flows.cart(live), {}) == ({}, [])
    assert run(flows.record_view(live, "book"), {}) == (None, [])  # dropped, not failed
    with pytest.raises(RedisUnavailable):
        run(flows.update(live, {"a": 1}), {})
    with pytest.raises(RedisUnavailable):
        run(flows.login(live, "ann"), {})
    # The cookie stays: the session is still there once Redis is back.
    assert live.response_headers(HTTPS) == [("vary", "Cookie")]


def test_a_forged_cookie_is_cleared_without_any_call() -> None:
    forged = state(f"webtier_session={TOKEN}.{'A' * 43}", signing_keys=[KEY])
    assert run(flows.user(forged), {}) == (None, [])
    assert dict(forged.response_headers(HTTPS))["set-cookie"].startswith("webtier_session=;")


def test_a_write_to_a_session_that_ended_meanwhile_goes_to_a_new_one() -> None:
    live = state()
    new = secrets.token_urlsafe(32)
    answers = [info(), UnknownSession("gone"), new, None]
    asked = drive(flows.update(live, {"a": 1}), answers).steps
    assert [a.method for a in asked] == ["info", "update", "new", "update"]
    assert asked[-1].args == (new, {"a": 1})
    assert dict(live.response_headers(HTTPS))["set-cookie"].startswith(f"webtier_session={new};")


def test_a_view_or_login_on_a_session_that_ended_meanwhile_starts_anew() -> None:
    new = secrets.token_urlsafe(32)
    viewed = state()
    replies = {"sessions.info": info(), "sessions.touch": False, "sessions.new": new}
    _, asked = run(flows.record_view(viewed, "book"), replies)
    assert [a.method for a in asked] == ["info", "touch", "new", "touch"]
    login = state()
    replies = {"sessions.info": info(None), "sessions.login": UnknownSession("gone")}
    replies["sessions.new"] = new
    assert run(flows.login(login, "ann"), replies)[0] is None
    assert run(flows.user(login), {}) == ("ann", [])


def test_non_ascii_and_repeated_cookies() -> None:
    value = encode(signed(), TOKEN)
    assert decode(signed(), f"webtier_session={TOKEN}.{'é' * 43}").token is None
    # A stale cookie of another path first, then ours: ours is found.
    both = f"webtier_session=stale; other=1; webtier_session={value}"
    assert decode(signed(), both) == flows.Decoded(TOKEN, True, False)
    assert decode(SessionOptions(), f"webtier_session = {TOKEN} ").token == TOKEN
    assert decode(SessionOptions(), "webtier_sessionx=1; xwebtier_session=2") == flows.Decoded(
        None, False
    )


def test_reads_touch_often_enough_for_the_tiers_idle_timeout() -> None:
    def refresh(idle: float, **settings: Any) -> float:
        tier = SimpleNamespace(config=Config(sessions=SessionSettings(idle_timeout=idle)))
        middleware = flows.Middleware(tier, None, settings)
        return middleware.state(None).refresh_after

    assert refresh(0) == 60  # no idle timeout: the option
    assert refresh(3600) == 60
    assert refresh(30) == 15  # at least twice per idle timeout
    assert refresh(3600, refresh_after=5) == 5
