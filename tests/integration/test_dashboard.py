"""The dashboard's HTTP side on a real server: the JSON API's answers (404
for unknown counters and contexts, never 500; 503 when Redis is away), the
round trips of a page load whatever the number of counters, access control
and the CSRF-guarded actions. The browser's view: test_dashboard_browser."""

from __future__ import annotations

import base64
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.routing import Mount

import webtier
from webtier.config import ACCESS_TIME
from webtier.errors import ConfigError
from webtier.web.dashboard import Credentials, check_bind, dashboard
from webtier.web.dashboard.csrf import CSRF_COOKIE

pytestmark = [pytest.mark.needs_redis, pytest.mark.anyio]

TOKEN = "s3cret-token-of-the-dashboard"

# What the page asks for when it loads (and then on each poll).
PAGE_LOAD = (
    "/",
    "/api/settings",
    "/api/counters?precision=1&limit=100",
    "/api/series?name=views:/0&precision=1",
    "/api/stats?hours=1&by=mean&limit=50",
    "/api/stats/%2Fitem%2F%7Bid%7D?hours=6",
    "/api/health?precision=5",
)


@pytest.fixture
async def tier(redis_url: str, config: webtier.Config) -> AsyncIterator[webtier.AsyncWebTier]:
    client = webtier.connect_async(redis_url)
    yield webtier.AsyncWebTier(client, config)
    await client.aclose()


def http(app: Any, **options: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost", **options
    )


async def some_data(tier: webtier.AsyncWebTier, counters: int = 3) -> None:
    for n in range(counters):
        await tier.counters.record(f"views:/{n}", n + 1)
    for value in (0.01, 0.02, 0.2):
        await tier.stats.record("/item/{id}", ACCESS_TIME, value)
    await tier.sessions.new()
    await tier.ranking.record_view("item1")


def counted(tier: webtier.AsyncWebTier) -> Callable[[], int]:
    """Counts the tier's round trips from now on (on one server, each step
    the transport exchanges is one pipeline)."""
    steps = 0
    exchange = tier.transport.exchange

    async def counting(step: Any, budget: Any = None) -> Any:
        nonlocal steps
        steps += 1
        return await exchange(step, budget)

    tier.transport.exchange = counting  # type: ignore[method-assign]
    return lambda: steps


@pytest.mark.usefixtures("steady_hour")
async def test_the_api_answers_each_panel(tier: webtier.AsyncWebTier) -> None:
    await some_data(tier)
    async with http(dashboard(tier)) as client:
        for path in PAGE_LOAD:
            response = await client.get(path)
            assert response.status_code == 200, (path, response.text)
        series = (await client.get("/api/series?name=views:/1&name=views:/2&precision=60")).json()
        assert [sum(c for _, c in s) for s in series["series"].values()] == [2, 3]
        stats = (await client.get("/api/stats?by=p95")).json()["contexts"]
        assert stats[0]["context"] == "/item/{id}"
        assert stats[0]["count"] == 3
        assert stats[0]["p95"] == pytest.approx(0.2, rel=0.03)
        health = (await client.get("/api/health")).json()
        assert health["sessions"]["count"] == 1
        assert health["top_items"] == [{"item": "item1", "views": 1.0}]
        page = (await client.get("/")).text
        assert "<script>" not in page  # no inline script: the CSP forbids it
        headers = (await client.get("/")).headers
        assert "script-src 'self'" in headers["content-security-policy"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/series?name=nope&precision=1",
        "/api/series?name=views:/0&name=nope",
        "/api/series?name=%00&precision=1",
        "/api/series?name=" + "x" * 5000,
        "/api/stats/nope",
        "/api/stats/%F0%9F%99%82",
        "/api/stats/" + "y" * 5000,
    ],
)
async def test_unknown_counters_and_contexts_are_404(tier: webtier.AsyncWebTier, path: str) -> None:
    await some_data(tier)
    async with http(dashboard(tier)) as client:
        response = await client.get(path)
    assert response.status_code == 404, response.text
    assert response.json()["error"].startswith("no such")


@pytest.mark.parametrize(
    "path",
    [
        "/api/series?name=views:/0&precision=7",
        "/api/series",
        "/api/counters?precision=abc",
        "/api/counters?limit=0",
        "/api/stats?hours=-1",
        "/api/stats?by=p42",
        "/api/health?precision=2",
    ],
)
async def test_malformed_queries_are_400(tier: webtier.AsyncWebTier, path: str) -> None:
    async with http(dashboard(tier)) as client:
        response = await client.get(path)
    assert response.status_code == 400, response.text


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_without_redis_the_api_says_unreachable_and_metrics_say_down() -> None:
    client = webtier.connect_async(f"redis://127.0.0.1:{closed_port()}/0")
    config = webtier.Config(retry=webtier.config.RetryPolicy(attempts=1, time_limit=1.0))
    tier = webtier.AsyncWebTier(client, config)
    try:
        async with http(dashboard(tier)) as http_client:
            for path in PAGE_LOAD[2:]:
                response = await http_client.get(path)
                assert response.status_code == 503, path
                assert response.json() == {"error": "Redis unreachable"}
            assert (await http_client.get("/")).status_code == 200
            metrics = await http_client.get("/metrics")
            assert "webtier_up 0.0" in metrics.text
    finally:
        await client.aclose()


@pytest.mark.usefixtures("steady_hour")
async def test_a_page_load_costs_the_same_round_trips_for_10_or_500_counters(
    tier: webtier.AsyncWebTier,
) -> None:
    # Unmarked: one server, where one exchange is one round trip.
    costs = []
    for counters in (10, 500):
        await some_data(tier, counters)
        steps = counted(tier)
        async with http(dashboard(tier)) as client:
            for path in PAGE_LOAD:
                assert (await client.get(path)).status_code == 200
        costs.append(steps())
        del tier.transport.exchange  # the method again
    print("round trips per page load:", costs)
    assert costs[0] == costs[1], costs
    # counters 2, series 2, stats 3 (period, contexts, records) + 2, one
    # context 1-2, health: counters 2, sessions, rows, workers, top items
    assert costs[0] <= 20, costs


# -- access ---------------------------------------------------------------------------------


def test_a_bind_beyond_loopback_needs_credentials() -> None:
    for host in ("0.0.0.0", "192.168.1.5", "::", "dash.example"):
        with pytest.raises(ConfigError, match="--token or --basic"):
            check_bind(host, Credentials())
        check_bind(host, Credentials(token=TOKEN))
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_bind(host, Credentials())


def test_weak_or_half_credentials_are_refused() -> None:
    with pytest.raises(ConfigError):
        Credentials(token="short")
    with pytest.raises(ConfigError):
        Credentials.basic("user-without-password")
    with pytest.raises(ConfigError):
        Credentials(user="ann")


async def test_a_token_is_required_when_configured(tier: webtier.AsyncWebTier) -> None:
    app = dashboard(tier, credentials=Credentials(token=TOKEN))
    async with http(app) as client:
        for path in ("/", "/api/settings", "/metrics", "/static/dashboard.js"):
            assert (await client.get(path)).status_code == 401
        wrong = {"Authorization": f"Bearer {TOKEN}x"}
        assert (await client.get("/api/settings", headers=wrong)).status_code == 401
        right = {"Authorization": f"Bearer {TOKEN}"}
        assert (await client.get("/api/settings", headers=right)).status_code == 200
        # Once in the address bar, then in an HttpOnly cookie.
        first = await client.get(f"/?token={TOKEN}")
        assert first.status_code == 303
        assert "token" not in first.headers["location"]
        assert "httponly" in first.headers["set-cookie"].lower()
        assert (await client.get("/api/settings")).status_code == 200
    async with http(app) as client:
        assert (await client.get("/?token=wrong")).status_code == 401


@pytest.mark.parametrize(
    "given", ["?token=%C3%A9", "?token=%FF", "?token=%00", "?token=" + quote(TOKEN + "\u00e9")]
)
async def test_a_token_of_any_characters_is_a_401_never_a_500(
    tier: webtier.AsyncWebTier, given: str
) -> None:
    app = dashboard(tier, credentials=Credentials(token=TOKEN))
    async with http(app) as client:
        assert (await client.get("/" + given)).status_code == 401
        odd = {"Authorization": "Bearer \u00e9", "cookie": "webtier_dashboard=\u00e9"}
        headers = {k: v.encode("utf-8") for k, v in odd.items()}
        assert (await client.get("/api/settings", headers=headers)).status_code == 401


async def test_basic_credentials(tier: webtier.AsyncWebTier) -> None:
    app = dashboard(tier, credentials=Credentials.basic("ann:pa55word"))

    def basic(pair: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}

    async with http(app) as client:
        refused = await client.get("/")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Basic")
        for pair in ("ann:wrong", "bob:pa55word", "ann:", "garbage"):
            assert (await client.get("/", headers=basic(pair))).status_code == 401
        assert (await client.get("/", headers={"Authorization": "Basic %%%"})).status_code == 401
        assert (await client.get("/", headers=basic("ann:pa55word"))).status_code == 200


# -- actions -------------------------------------------------------------------------------


async def test_read_only_unless_actions_are_allowed(tier: webtier.AsyncWebTier) -> None:
    async with http(dashboard(tier)) as client:
        response = await client.post("/api/actions/purge", json={"item": "item1"})
    assert response.status_code in (404, 405)


async def test_actions_need_the_csrf_token(tier: webtier.AsyncWebTier) -> None:
    async with http(dashboard(tier, allow_actions=True)) as client:
        assert (await client.post("/api/actions/purge", json={"item": "item1"})).status_code == 403
        await client.get("/")  # sets the CSRF cookie
        csrf = client.cookies[CSRF_COOKIE]
        forged = await client.post(
            "/api/actions/purge", json={"item": "item1"}, headers={"x-csrftoken": "forged"}
        )
        assert forged.status_code == 403
        done = await client.post(
            "/api/actions/purge", json={"item": "item1"}, headers={"x-csrftoken": csrf}
        )
        assert done.status_code == 200, done.text
        assert done.json() == {"item": "item1", "dropped": 0}
        bad = await client.post(
            "/api/actions/purge", json={"url": 5}, headers={"x-csrftoken": csrf}
        )
        assert bad.status_code == 400


async def test_a_stale_or_foreign_csrf_cookie_is_replaced(tier: webtier.AsyncWebTier) -> None:
    async with http(dashboard(tier, allow_actions=True)) as before:
        await before.get("/")
        stale = before.cookies[CSRF_COOKIE]  # signed by a dashboard since restarted
    async with http(dashboard(tier, allow_actions=True)) as client:
        # The shop's (or Django's) cookie of the usual name is not the dashboard's.
        client.cookies.set("csrftoken", stale)
        client.cookies.set(CSRF_COOKIE, stale)
        refused = await client.post(
            "/api/actions/purge", json={"item": "item1"}, headers={"x-csrftoken": stale}
        )
        assert refused.status_code == 403
        polled = await client.get("/api/settings")  # the page's next poll
        fresh = polled.cookies[CSRF_COOKIE]
        assert fresh != stale
        done = await client.post(
            "/api/actions/purge", json={"item": "item1"}, headers={"x-csrftoken": fresh}
        )
        assert done.status_code == 200, done.text
        assert client.cookies["csrftoken"] == stale  # left alone


@pytest.mark.parametrize(
    ("host", "status"),
    [("localhost", 200), ("localhost:8001", 200), ("127.0.0.1:8001", 200), ("[::1]:8001", 200),
     ("127.0.0.1", 200), ("LOCALHOST.", 200), ("dash.internal:8001", 200),
     ("evil.example", 400), ("evil.example:8001", 400), ("localhost.evil.example", 400),
     ("127.0.0.1.evil.example", 400), ("", 400), ("[::1", 400), ("\u00e9", 400)],
)  # fmt: skip
async def test_open_it_answers_this_machines_host_names_only(
    tier: webtier.AsyncWebTier, host: str, status: int
) -> None:
    app = dashboard(tier, allowed_hosts=["dash.internal"])
    async with http(app) as client:
        for path in ("/api/health", "/metrics", "/"):
            answer = await client.get(path, headers={"host": host.encode()})
            assert answer.status_code == status, (path, answer.text)
    # With credentials a rebinding page has none to give: any name is served.
    guarded = dashboard(tier, credentials=Credentials(token=TOKEN))
    async with http(guarded) as client:
        bearer = {"host": "dash.example", "Authorization": f"Bearer {TOKEN}"}
        assert (await client.get("/api/settings", headers=bearer)).status_code == 200


async def test_mounted_under_a_path_its_links_follow(tier: webtier.AsyncWebTier) -> None:
    app = Starlette(routes=[Mount("/dashboard", dashboard(tier))])
    async with http(app, follow_redirects=True) as client:
        page = (await client.get("/dashboard/")).text
        assert 'src="http://localhost/dashboard/static/dashboard.js"' in page
        assert (await client.get("/dashboard/static/vendor/uplot/uPlot.iife.min.js")).is_success
        assert (await client.get("/dashboard/static/vendor/uplot/LICENSE")).is_success
        assert (await client.get("/dashboard/metrics")).text.startswith("# HELP")


@given(name=st.text(max_size=300))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
async def test_any_name_is_404_or_data_never_500(tier: webtier.AsyncWebTier, name: str) -> None:
    async with http(dashboard(tier)) as client:
        for response in (
            await client.get("/api/series", params={"name": name, "precision": "1"}),
            await client.get("/api/stats/" + quote(name, safe="")),
        ):
            assert response.status_code in (200, 404), (name, response.text)
