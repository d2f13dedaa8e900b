"""The session middlewares' shared core, with no server: cookie signing and
parsing, cookie attributes, options. The flows run on a server:
tests/integration/test_sessions_flows.py."""

from __future__ import annotations

import logging
import secrets
from typing import Any

import pytest

from webtier.errors import ConfigError
from webtier.web.sessions import SessionOptions
from webtier.web.sessions.adapter import environ_headers, merge_headers
from webtier.web.sessions.cookie import (
    Decoded,
    Where,
    came_through_proxy,
    cookie_morsel,
    decode,
    encode,
    is_loopback,
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
    assert decode(signed(), f"webtier_session={value}") == Decoded(TOKEN, True, False)
    rotated = SessionOptions(signing_keys=[b"n" * 32, KEY])
    assert decode(rotated, f"webtier_session={value}") == Decoded(TOKEN, True, True)


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
    assert decode(SessionOptions(), None) == Decoded(None, False)
    assert decode(SessionOptions(), "sessionid=abc") == Decoded(None, False)


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


def test_secure_is_dropped_for_local_plain_http_only() -> None:
    local = Where("", "http", "localhost:8000")
    assert "secure" not in attributes(SessionOptions(), local)
    assert "secure" not in attributes(SessionOptions(), Where("", "http", "127.0.0.1:8000"))
    assert "secure" not in attributes(SessionOptions(), Where("", "http", "[::1]:80", "::1"))
    # A test client's peer is a name; a unix socket's is nothing: not remote.
    assert "secure" not in attributes(
        SessionOptions(), Where("", "http", "localhost", "testclient")
    )
    assert "secure" in attributes(SessionOptions(), Where("", "http", "shop.example"))
    assert "secure" in attributes(SessionOptions(), Where("", "https", "localhost"))
    # Host is the client's to say: from another machine it keeps Secure.
    assert "secure" in attributes(SessionOptions(), Where("", "http", "localhost", "192.0.2.7"))
    # Through a proxy, http and the peer are the proxy's: Secure.
    proxied = Where("", "http", "127.0.0.1:8000", "127.0.0.1", proxied=True)
    assert "secure" in attributes(SessionOptions(), proxied)
    # Asked to: Secure everywhere.
    assert "secure" in attributes(SessionOptions(insecure_local_http=False), local)


def test_a_cookie_without_secure_is_explained_once(caplog: pytest.LogCaptureFixture) -> None:
    local = Where("", "http", "app.localhost:8123")
    with caplog.at_level(logging.WARNING, logger="webtier.sessions"):
        for _ in range(3):
            attributes(SessionOptions(), local)
            attributes(SessionOptions(), HTTPS)
    [record] = [r for r in caplog.records if "without Secure" in r.getMessage()]
    assert "http://app.localhost:8123" in record.getMessage()
    assert "insecure_local_http=False" in record.getMessage()


@pytest.mark.parametrize(
    ("headers", "proxied"),
    [
        (["Host", "Cookie"], False),
        (["X-Forwarded-For"], True),
        (["x-forwarded-proto"], True),
        (["Forwarded"], True),
        (["X-Forwarded-Host"], True),
    ],
)
def test_a_proxys_headers_mark_the_request_proxied(headers: list[str], proxied: bool) -> None:
    assert came_through_proxy(headers) is proxied


def test_wsgi_environ_header_names() -> None:
    environ = {"HTTP_X_FORWARDED_PROTO": "https", "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "x"}
    assert sorted(environ_headers(environ)) == ["HOST", "X-FORWARDED-PROTO"]


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
        ("a" * 300 + ".localhost", False),  # no name is that long
        ("a" * 240 + ".localhost:8000", True),
    ],
)
def test_loopback_hosts(host: str, local: bool) -> None:
    assert is_loopback(host) is local
    assert is_loopback(host) is local  # as kept


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


def test_non_ascii_and_repeated_cookies() -> None:
    value = encode(signed(), TOKEN)
    assert decode(signed(), f"webtier_session={TOKEN}.{'é' * 43}").token is None
    # A stale cookie of another path first, then ours: ours is found.
    both = f"webtier_session=stale; other=1; webtier_session={value}"
    assert decode(signed(), both) == Decoded(TOKEN, True, False)
    assert decode(SessionOptions(), f"webtier_session = {TOKEN} ").token == TOKEN
