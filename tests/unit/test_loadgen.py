"""The load generator's model and its browser parts, without a server: Zipf
popularity, visit plans, returning visitors, CSRF tokens, cookies, the
loopback check and the report's figures."""

from __future__ import annotations

import random
from collections import Counter

import pytest

# The load generator speaks HTTP through httpx (webtier[shop]): without it, as
# with only the non-web part of .[test], this module skips (a failure in CI).
pytest.importorskip("httpx")

from webtier.demo.loadgen import Traffic, Zipf, check_target
from webtier.demo.loadgen.browser import absorb_cookies, cookie_header, form_token
from webtier.demo.loadgen.model import Returning, Visitor
from webtier.demo.loadgen.report import Recorder, route_of
from webtier.errors import ConfigError

DRAWS = 200_000


def test_zipf_popularity_has_the_shape_asked_for() -> None:
    zipf = Zipf(100_000, s=1.1)
    rng = random.Random(7)
    seen = Counter(zipf.draw(rng) for _ in range(DRAWS))
    assert min(seen) >= 1
    assert max(seen) <= 100_000
    # Item 1 is the most viewed, at its expected share (within 3 %).
    assert seen.most_common(1)[0][0] == 1
    assert seen[1] / DRAWS == pytest.approx(zipf.probability(1), rel=0.03)
    # The ratio of ranks 1 and 2 is 2**s.
    assert seen[1] / seen[2] == pytest.approx(2**1.1, rel=0.05)
    # The top 100 items take their expected share of the views.
    top = sum(zipf.probability(i) for i in range(1, 101))
    assert sum(seen[i] for i in range(1, 101)) / DRAWS == pytest.approx(top, rel=0.02)
    # ...and the long tail is there: thousands of distinct items were viewed.
    assert len(seen) > 20_000


def test_zipf_is_repeatable_with_a_seed() -> None:
    zipf = Zipf(1000)
    first, second = random.Random(3), random.Random(3)
    assert [zipf.draw(first) for _ in range(100)] == [zipf.draw(second) for _ in range(100)]


@pytest.mark.parametrize(("items", "s"), [(0, 1.1), (10, 0.0), (10, -1), (10, 11)])
def test_zipf_refuses_bad_settings(items: int, s: float) -> None:
    with pytest.raises(ConfigError):
        Zipf(items, s)


def test_plans_follow_the_model() -> None:
    traffic, zipf, rng = Traffic(items=1000, users=5), Zipf(1000), random.Random(11)
    plans = [traffic.plan(rng, zipf) for _ in range(5000)]
    for plan in plans:
        assert plan[0].action == "home"
        actions = [step.action for step in plan]
        assert "item" in actions
        if "checkout" in actions:  # a buyer filled a cart and logged in first
            assert actions.index("add") < actions.index("login") < actions.index("checkout")
        if "logout" in actions:
            assert "login" in actions
        for step in plan:
            if step.action == "login":
                assert step.user in {f"user{n}" for n in range(1, 6)}
            if step.action == "add":
                assert step.count is not None
                assert 1 <= step.count <= 3
    views = sum(step.action == "item" for plan in plans for step in plan)
    assert views / len(plans) == pytest.approx(traffic.items_per_visit, rel=0.1)
    buyers = sum(any(step.action == "checkout" for step in plan) for plan in plans)
    assert buyers / len(plans) == pytest.approx(traffic.cart * traffic.checkout, rel=0.2)


def test_a_returning_logged_in_visitor_does_not_log_in_again() -> None:
    traffic, zipf, rng = Traffic(items=100), Zipf(100), random.Random(5)
    for _ in range(500):
        plan = traffic.plan(rng, zipf, logged_in=True)
        assert all(step.action != "login" for step in plan)


def test_returning_visitors_are_bounded_and_come_back() -> None:
    traffic = Traffic(comes_back=1.0, returning=1.0)
    rng = random.Random(1)
    returning = Returning(limit=10)
    for n in range(100):
        returning.leave(Visitor({"session": str(n)}), traffic, rng)
    assert len(returning) == 10
    back = returning.arrive(traffic, rng)
    assert back.cookies["session"] in {str(n) for n in range(90, 100)}
    assert len(returning) == 9
    # A visitor without cookies has nothing to come back with.
    returning.leave(Visitor({}), traffic, rng)
    assert len(returning) == 9


def test_traffic_refuses_shares_out_of_range() -> None:
    with pytest.raises(ConfigError):
        Traffic(cart=1.5)
    with pytest.raises(ConfigError):
        Traffic(users=0)


@pytest.mark.parametrize(
    "page",
    [
        '<form><input type="hidden" name="csrftoken" value="abc&amp;1"></form>',
        "<form><input value='abc&amp;1' type=hidden name='csrftoken'></form>",
        "<form><INPUT name=csrftoken value=abc&amp;1></form>",
    ],
)
def test_the_form_token_is_read_whatever_the_attribute_order(page: str) -> None:
    assert form_token(f"<p>hello</p>{page}") == "abc&1"


def test_the_token_of_the_form_posting_to_an_action() -> None:
    page = (
        '<form method=post action="/logout"><input name=csrftoken value=t1></form>'
        '<FORM action=\'/checkout\' class=x>\n<input name="csrftoken" value="t2">\n</FORM>'
    )
    assert form_token(page, "/checkout") == "t2"
    assert form_token(page, "/logout") == "t1"
    assert form_token(page) == "t1"
    assert form_token(page, "/cart") is None  # no such form: nothing to submit


def test_no_form_no_token() -> None:
    assert form_token("<input name='q' value='x'>") is None
    assert form_token("<input name=csrftoken>") is None


def test_cookies_are_kept_and_deleted_as_a_browser_does() -> None:
    cookies: dict[str, str] = {}
    absorb_cookies(cookies, ["session=t1; Path=/; HttpOnly; SameSite=Lax", "csrf=x; Secure"])
    assert cookies == {"session": "t1", "csrf": "x"}
    assert cookie_header(cookies) == {"cookie": "session=t1; csrf=x"}
    absorb_cookies(cookies, ["session=t2; Path=/"])  # a login rotates the token
    assert cookies["session"] == "t2"
    absorb_cookies(cookies, ['session=""; Max-Age=0; Path=/'])
    absorb_cookies(cookies, ["csrf=; expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/"])
    assert cookies == {}
    assert cookie_header(cookies) == {}


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8000", "http://localhost:8000/", "https://[::1]:8443", "http://127.9.9.9"],
)
def test_loopback_targets_are_accepted(url: str) -> None:
    assert check_target(url) == url.rstrip("/")


@pytest.mark.parametrize(
    "url",
    ["http://10.0.0.1:8000", "http://192.0.2.7", "http://[2001:db8::1]/", "http://no.such.invalid"],
)
def test_remote_targets_are_refused_unless_allowed(url: str) -> None:
    with pytest.raises(ConfigError, match="--allow-remote"):
        check_target(url)
    assert check_target(url, allow_remote=True) == url.rstrip("/")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1", "127.0.0.1:8000", "http://", ""])
def test_what_is_not_an_http_url_is_refused(url: str) -> None:
    with pytest.raises(ConfigError, match="not an http"):
        check_target(url, allow_remote=True)


def test_routes_are_reported_by_template() -> None:
    assert route_of("GET", "/item/42") == "GET /item/{item_id}"
    assert route_of("GET", "/item/x?y=1") == "GET /item/{item_id}"
    assert route_of("GET", "/orders/7") == "GET /orders/{order_id}"
    assert route_of("POST", "/cart") == "POST /cart"


def test_the_report_has_percentiles_statuses_and_orders() -> None:
    recorder = Recorder()
    for ms in range(1, 101):
        recorder.response("GET /item/{item_id}", 200, ms / 1000)
    recorder.response("GET /item/{item_id}", 404, 0.001)
    recorder.response("POST /checkout", 303, 0.002)
    recorder.response("POST /checkout", 500, 0.002)
    recorder.transport_error("POST /checkout")
    recorder.checkout(17)
    report = recorder.report(2.0)
    item = report.route("GET /item/{item_id}")
    assert item is not None
    assert item.requests == 101
    assert item.p50 == pytest.approx(0.050, rel=0.02)
    assert item.p99 == pytest.approx(0.099, rel=0.02)
    assert item.slowest == pytest.approx(0.100)
    assert (report.status("2xx"), report.status("4xx"), report.status("5xx")) == (100, 1, 1)
    assert report.transport_errors == 1
    assert report.requests == 104
    assert report.requests_per_second == pytest.approx(52)
    document = report.as_dict()
    assert document["order_ids"] == [17]
    assert document["statuses"] == {"2xx": 100, "3xx": 1, "4xx": 1, "5xx": 1}
    assert (report.code(404), report.code(500), report.code(403)) == (1, 1, 0)
    assert document["routes"][0]["status_codes"] == {"200": 100, "404": 1}
    assert report.table().row_count == 2
