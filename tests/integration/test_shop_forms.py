"""The shop's forms against hostile input, over HTTP against the real app:
CSRF tokens bound to the visitor's session (a token planted by another
origin is refused), cookies of any name or bytes, and bodies that are not
the shop's forms: 4xx, never a 500; on loopback, Host names other than this
machine's: 400 (issue #24, items 4, 6 and 8)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers.shop import browser, post, serving, stocked, token
from webtier.demo.shop.security import CSRF_COOKIE

pytestmark = pytest.mark.parametrize("database", ["sqlite"], indirect=True)


@pytest.fixture
def shop(redis_url: str, prefix: str, database: sa.Engine) -> Iterator[str]:
    with serving(redis_url, prefix, stocked(database)) as url:
        yield url


def in_cart(client: httpx.Client) -> int:
    """The lines of the visitor's cart (two forms each: change and remove)."""
    return client.get("/cart").text.count('name="item"') // 2


def test_a_token_planted_by_another_origin_is_refused(shop: str) -> None:
    with browser(shop) as attacker:
        bait = token(attacker.get("/item/1"))  # bound to the attacker's visitor id
        planted = attacker.cookies[CSRF_COOKIE]
    with browser(shop) as victim:
        assert post(victim, "/item/2", "/cart", item="2", count="1").status_code == 303
        # A sibling subdomain or another port of the host plants the cookie.
        victim.cookies.set(CSRF_COOKIE, planted)
        forged = {"item": "3", "count": "1", "csrftoken": bait}
        assert victim.post("/cart", data=forged).status_code == 403
        bearer = {"authorization": "Bearer x"}  # no way around the check
        assert victim.post("/cart", data=forged, headers=bearer).status_code == 403
        assert victim.post("/checkout", data={"csrftoken": bait}).status_code == 403
        assert in_cart(victim) == 1


def test_a_page_holding_a_token_is_never_kept_by_shared_caches(shop: str) -> None:
    with browser(shop) as client:
        for path in ("/item/1", "/item/1", "/login"):
            page = client.get(path)
            token(page)
            assert page.headers["cache-control"] == "no-store", path


def test_a_token_is_bound_to_its_session_and_follows_the_login(shop: str) -> None:
    with browser(shop) as client:
        before = token(client.get("/login"))
        assert post(client, "/login", "/login", username="alice").status_code == 303
        after = token(client.get("/cart"))
        assert after != before  # the session rotated at login: so did the token
        refused = client.post("/cart", data={"item": "1", "count": "1", "csrftoken": before})
        assert refused.status_code == 403
        added = client.post("/cart", data={"item": "1", "count": "1", "csrftoken": after})
        assert added.status_code == 303


@pytest.mark.parametrize(
    "odd",
    [b"user[id]=5", b"@/,(){}<>?=1", b"\xff\xfe=\xc3(", b"=x", b"csrftoken=forged", b"a=b=c"],
)
def test_odd_cookies_neither_break_nor_shadow_the_shops(shop: str, odd: bytes) -> None:
    with browser(shop) as client:
        form = token(client.get("/item/1"))
        ours = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
        header = odd + b"; " + ours.encode()
        for path in ("/", "/healthz", "/item/1", "/cart", "/login"):
            assert client.get(path, headers={"cookie": header}).status_code == 200, path
        sent = client.post(
            "/cart",
            data={"item": "1", "count": "1", "csrftoken": form},
            headers={"cookie": header},
        )
        assert sent.status_code == 303
        assert in_cart(client) == 1


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        ("application/x-www-form-urlencoded", b"item=1&count=1&csrftoken=\xff\xfe", 400),
        ("application/x-www-form-urlencoded", b"item=%FF&csrftoken=x", 403),
        ("application/x-www-form-urlencoded", b"x=" + b"y" * 100_000, 413),
        (
            "multipart/form-data; boundary=b",
            b'--b\r\nContent-Disposition: form-data; name="item"\r\n\r\n1\r\n--b--\r\n',
            415,
        ),
        ("multipart/form-data", b"--", 415),
        ("application/json", b'{"item": 1}', 415),
    ],
)
def test_bodies_other_than_the_shops_forms_are_4xx(
    shop: str, content_type: str, body: bytes, status: int
) -> None:
    with browser(shop) as client:
        client.get("/item/1")
        for path in ("/cart", "/login", "/checkout"):
            answer = client.post(path, content=body, headers={"content-type": content_type})
            assert answer.status_code == status, (path, answer.text[:200])
            assert "@@webtier-csrftoken@@" not in answer.text  # its forms hold a token
        assert client.get("/healthz").status_code == 200


def test_on_loopback_it_answers_this_machines_host_names_only(shop: str) -> None:
    port = shop.rsplit(":", 1)[1]
    with browser(shop) as client:
        for path in ("/", "/healthz", "/dashboard/api/health", "/metrics"):
            for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.nip.io"):
                assert client.get(path, headers={"host": host}).status_code == 400, (path, host)
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
                assert client.get(path, headers={"host": host}).status_code == 200, (path, host)
