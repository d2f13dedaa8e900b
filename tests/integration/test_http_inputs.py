"""Raw HTTP against every route of the shop, the dashboard and the metrics
app, on real servers (uvicorn, Redis, SQLite): generated header names and
bytes, cookie names and values, bodies and content types. Whatever comes,
the answer is 2xx, 3xx or 4xx, never a 500, and the shop still serves
afterwards (issue #24, item 4)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import webtier
from tests.helpers.shop import serving, stocked
from tests.helpers.web import uvicorn_serving
from webtier.metrics import asgi_app
from webtier.web.dashboard import Credentials, dashboard

pytestmark = [
    pytest.mark.needs_redis,
    pytest.mark.parametrize("database", ["sqlite"], indirect=True),
]

SHOP = ["/", "/item/1", "/item/x", "/cart", "/checkout", "/orders/1", "/login", "/logout",
        "/account", "/account/logout-everywhere", "/flash-sale", "/healthz", "/readyz",
        "/static/shop.css", "/dashboard/", "/dashboard/api/health", "/metrics"]  # fmt: skip
DASHBOARD = ["/", "/api/settings", "/api/counters", "/api/series?name=a", "/api/stats",
             "/api/stats/%2Fitem", "/api/health", "/api/actions/purge", "/metrics",
             "/static/dashboard.js", "/?token=%C3%A9"]  # fmt: skip
METRICS = ["/", "/metrics"]
QUERIES = ["", "?token=%C3%A9", "?token=%FF", "?item=%00", "?a=%zz", "?item=1&item=2"]

TOKEN = "a-dashboard-token-of-its-own"
CONTENT_TYPES = [
    "application/x-www-form-urlencoded",
    "application/x-www-form-urlencoded; charset=latin-1",
    "multipart/form-data; boundary=b",
    "multipart/form-data",
    "application/json",
    "text/plain; charset=\xff",
    "",
]
# Header names: tokens, and bytes a lenient parser might let through.
header_names = st.one_of(
    st.sampled_from([b"cookie", b"authorization", b"accept", b"accept-encoding", b"content-type",
                     b"if-none-match", b"x-csrftoken", b"x-forwarded-for", b"forwarded", b"range"]),
    st.binary(min_size=1, max_size=12).filter(lambda b: not {13, 10, 58} & set(b)),  # \r \n :
)  # fmt: skip
header_values = st.binary(max_size=40).map(
    lambda b: b.replace(b"\r", b"").replace(b"\n", b"").strip()
)
cookie_pairs = st.lists(
    st.tuples(
        st.one_of(
            st.sampled_from([b"webtier_session", b"webtier_csrf", b"csrftoken",
                             b"webtier_dashboard", b"webtier_dashboard_csrf", b"user[id]"]),
            st.binary(max_size=8),
        ),
        st.binary(max_size=24),
    ),
    max_size=4,
)  # fmt: skip
form_bodies = st.one_of(
    st.binary(max_size=200),
    st.lists(st.tuples(st.sampled_from(["csrftoken", "item", "count", "username", "x"]),
                       st.text(max_size=10)), max_size=4)
    .map(lambda fields: "&".join(f"{k}={v}" for k, v in fields).encode("utf-8", "surrogatepass")),
    st.just(b'--b\r\nContent-Disposition: form-data; name="csrftoken"\r\n\r\nx\r\n--b--\r\n'),
)  # fmt: skip


def raw_request(
    method: bytes, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes = b""
) -> bytes:
    """``method target HTTP/1.1`` with ``headers`` and ``body``, as bytes;
    ``Host`` is this machine's (the open shop answers no other)."""
    lines = [method + b" " + target + b" HTTP/1.1", b"host: 127.0.0.1"]
    lines += [name + b": " + value for name, value in headers]
    lines += [b"content-length: " + str(len(body)).encode(), b"connection: close"]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, bytes]:
    """An app's name and a raw request to one of its routes."""
    app, path = draw(
        st.one_of(
            st.tuples(st.just("shop"), st.sampled_from(SHOP)),
            st.tuples(st.just("dashboard"), st.sampled_from(DASHBOARD)),
            st.tuples(st.just("metrics"), st.sampled_from(METRICS)),
        )
    )
    method = draw(st.sampled_from([b"GET", b"POST", b"HEAD", b"PUT", b"DELETE", b"OPTIONS"]))
    if "?" not in path:
        path += draw(st.sampled_from(QUERIES))
    headers = draw(st.lists(st.tuples(header_names, header_values), max_size=4))
    cookies = draw(cookie_pairs)
    if cookies:
        headers.append((b"cookie", b"; ".join(k + b"=" + v for k, v in cookies)))
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    if content_type:
        headers.append((b"content-type", content_type.encode("latin-1")))
    return app, raw_request(method, path.encode(), headers, draw(form_bodies))


def status_of(url: str, request: bytes) -> int:
    """The status of the server's answer to ``request``, sent as it is."""
    place = urlsplit(url)
    with socket.create_connection((place.hostname, place.port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        # To the end (the request says "connection: close"): the server
        # closes its side first, and keeps no connection open at its exit.
        while chunk := sock.recv(65536):
            answer += chunk
    if not answer:
        return 400  # the server closed without an answer: a parser's refusal
    return int(answer.split(b" ", 2)[1])


def tier_app(redis_url: str, prefix: str, build: Callable[[webtier.AsyncWebTier], Any]) -> Any:
    """``build(tier)`` on a Redis client of its own, closed when the server
    stops (the app itself has no lifespan to speak of)."""
    client = webtier.connect_async(redis_url)
    app = build(webtier.AsyncWebTier(client, webtier.Config(prefix=prefix)))

    async def served(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await client.aclose()
        await send({"type": "lifespan.shutdown.complete"})

    return served


@pytest.fixture
def servers(redis_url: str, prefix: str, database: sa.Engine) -> Iterator[dict[str, str]]:
    def guarded(tier: webtier.AsyncWebTier) -> Any:
        return dashboard(tier, credentials=Credentials(token=TOKEN), allow_actions=True)

    with contextlib.ExitStack() as stack:
        urls = {
            "shop": stack.enter_context(serving(redis_url, prefix, stocked(database))),
            "dashboard": stack.enter_context(uvicorn_serving(tier_app(redis_url, prefix, guarded))),
            "metrics": stack.enter_context(uvicorn_serving(tier_app(redis_url, prefix, asgi_app))),
        }
        yield urls


@settings(
    max_examples=120,
    derandomize=True,  # the same requests every run
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=requests())
def test_any_request_is_answered_without_a_500(
    servers: dict[str, str], request: tuple[str, bytes]
) -> None:
    app, raw = request
    status = status_of(servers[app], raw)
    assert 200 <= status < 500, raw
    assert status_of(servers["shop"], raw_request(b"GET", b"/healthz", [])) == 200
