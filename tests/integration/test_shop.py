"""The demo shop's pages and their rules, over HTTP against the real app
(uvicorn), a real Redis and a real SQL database (webtier.demo.shop)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

import webtier
from tests.helpers.rows import set_stock
from tests.helpers.servers import wait_for
from tests.helpers.shop import ITEMS, browser, post, serving, stocked, token
from webtier.config import SessionSettings
from webtier.demo import shopdb
from webtier.demo.shop import catalog
from webtier.demo.shop.orders import STATS_CONTEXT

pytestmark = pytest.mark.parametrize("database", ["sqlite"], indirect=True)

STOCK = re.compile(r'<dd id="stock">(\d+)</dd>')


@pytest.fixture
def shop(redis_url: str, prefix: str, database: sa.Engine) -> Iterator[str]:
    config = webtier.Config(sessions=SessionSettings(cart_lines=3))
    with serving(redis_url, prefix, stocked(database), config) as url:
        yield url


def stock_shown(client: httpx.Client, item: int) -> int:
    page = client.get(f"/item/{item}")
    assert page.status_code == 200, page.text
    found = STOCK.search(page.text)
    assert found, page.text
    return int(found.group(1))


def test_pages_answer_with_security_headers(shop: str) -> None:
    with browser(shop) as client:
        for path in ("/", "/item/1", "/cart", "/login", "/flash-sale"):
            page = client.get(path)
            assert page.status_code == 200, path
            assert "<script" not in page.text  # no inline script, no framework
            policy = page.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in policy
            assert "'unsafe-inline'" not in policy
            assert page.headers["x-content-type-options"] == "nosniff"
            assert page.headers["referrer-policy"] == "same-origin"
        assert client.get("/healthz").text == "ok"
        assert client.get("/static/shop.css").headers["content-type"].startswith("text/css")


@pytest.mark.parametrize(
    "path", ["/item/0", "/item/007", f"/item/{ITEMS + 1}", "/item/abc", "/item/-1", "/item/1e3",
             "/item/99999999999999999999999", "/item/%F0%9F%99%82", "/nowhere", "/orders/abc"]
)  # fmt: skip
def test_unknown_pages_are_404_not_500(shop: str, path: str) -> None:
    with browser(shop) as client:
        page = client.get(path)
    assert page.status_code == 404
    assert re.search(r"No such|not found", page.text)
    assert "Traceback" not in page.text


def test_a_post_without_the_right_token_is_refused(shop: str) -> None:
    with browser(shop) as client:
        assert client.post("/cart", data={"item": "1", "count": "1"}).status_code == 403
        client.get("/item/1")  # now with the CSRF cookie
        refused = client.post("/cart", data={"item": "1", "count": "1", "csrftoken": "forged"})
        assert refused.status_code == 403
        for action in ("/login", "/logout", "/checkout", "/account/logout-everywhere"):
            assert client.post(action, data={"username": "mallory"}).status_code == 403
        assert client.get("/cart").text.count('name="item"') == 0  # nothing was added


def test_the_cart_adds_changes_removes_and_says_so(shop: str) -> None:
    with browser(shop) as client:
        added = post(client, "/item/5", "/cart", item="5", count="2")
        assert added.status_code == 303
        assert added.headers["location"] == "/cart"
        cart = client.get("/cart")
        assert "Item 5: 2 in your cart." in cart.text
        post(client, "/cart", "/cart", item="5", count="4")
        assert 'value="4"' in client.get("/cart").text
        post(client, "/cart", "/cart", item="5", count="0")
        emptied = client.get("/cart")
        assert "Item 5 removed." in emptied.text
        assert "Your cart is empty" in emptied.text


def test_the_carts_checkout_key_comes_with_its_first_line(shop: str) -> None:
    # The key is written with the first line's notice, so the cart page only
    # reads: a checkout sent before any cart page was seen (the session's
    # key, none in the form) places the order, and the cart page then shows
    # that the cart was taken. Its notice showed once, on the order's page.
    with browser(shop) as client:
        post(client, "/item/6", "/cart", item="6", count="1")
        placed = post(client, "/item/6", "/checkout")
        assert placed.status_code == 303, placed.text
        assert placed.headers["location"].startswith("/orders/")
        order = client.get(placed.headers["location"])
        assert "Item 6: 1 in your cart." in order.text
        assert "is placed" in order.text
        cart = client.get("/cart")
        assert "Your cart is empty" in cart.text
        assert "is placed" not in cart.text


@pytest.mark.parametrize(
    ("item", "count", "says"),
    [
        ("5", "1001", "at most 1000 of one item"),
        ("5", "-1", "whole number"),
        ("5", "two", "whole number"),
        ("0", "1", "No item"),
        ("abc", "1", "No item"),
        (str(ITEMS + 1), "1", "No item"),
    ],
)
def test_bad_cart_changes_are_400_with_a_clear_message(
    shop: str, item: str, count: str, says: str
) -> None:
    with browser(shop) as client:
        refused = post(client, "/item/1", "/cart", item=item, count=count)
    assert refused.status_code == 400
    assert says in refused.text


def test_the_cart_line_limit_is_enforced(shop: str) -> None:
    with browser(shop) as client:
        for item in (1, 2, 3):
            assert post(client, "/login", "/cart", item=str(item), count="1").status_code == 303
        refused = post(client, "/cart", "/cart", item="4", count="1")
        assert refused.status_code == 400
        assert "A cart holds 3 items" in refused.text


def test_login_merges_the_cart_and_kills_the_old_cookie(shop: str) -> None:
    with browser(shop) as earlier:  # alice's cart from another visit
        post(earlier, "/login", "/login", username="alice")
        post(earlier, "/item/7", "/cart", item="7", count="1")
    with browser(shop) as client:
        post(client, "/item/7", "/cart", item="7", count="2")
        anonymous = client.cookies["webtier_session"]
        logged_in = post(client, "/login", "/login", username="alice")
        assert logged_in.status_code == 303
        assert logged_in.headers["location"] == "/"
        home = client.get("/")
        assert "Your cart and your account&#39;s were merged" in home.text
        assert "item 7 \u00d73 (2 from this visit + 1 from your account)" in home.text
        assert client.cookies["webtier_session"] != anonymous
        assert 'value="3"' in client.get("/cart").text
    with browser(shop) as replay:  # the old cookie is dead
        replay.cookies.set("webtier_session", anonymous)
        assert "Your cart is empty" in replay.get("/cart").text
        assert replay.get("/account").headers.get("location") == "/login"


def test_the_merge_report_names_the_accounts_lines_with_no_item_in_common(shop: str) -> None:
    with browser(shop) as earlier:  # bob's cart from another visit: item 3
        post(earlier, "/login", "/login", username="bob")
        post(earlier, "/item/3", "/cart", item="3", count="1")
    with browser(shop) as client:
        post(client, "/item/1", "/cart", item="1", count="2")
        post(client, "/login", "/login", username="bob")
        home = client.get("/").text
        assert "item 1 \u00d72 (2 from this visit)" in home
        assert "item 3 \u00d71 (1 from your account)" in home
        assert "came with you" not in home


def test_the_account_marks_the_visitors_own_session(shop: str) -> None:
    with browser(shop) as phone, browser(shop) as laptop:
        post(phone, "/login", "/login", username="finn")
        post(laptop, "/login", "/login", username="finn")
        on_laptop, on_phone = laptop.get("/account").text, phone.get("/account").text
    for page in (on_laptop, on_phone):
        assert page.count("<code>") == 2
        assert page.count("this browser") == 1
    # Each marks its own: the marked row differs between the two.
    mine = re.compile(r"<code>([^<]+)</code> <strong>this browser</strong>")
    assert mine.findall(on_laptop) != mine.findall(on_phone)


def test_checkout_writes_the_order_and_the_item_page_shows_the_new_stock(
    shop: str, database: sa.Engine, redis_url: str, prefix: str
) -> None:
    with browser(shop) as anonymous, browser(shop) as client:
        before = stock_shown(anonymous, 9)
        wait_for(lambda: anonymous.get("/item/9").headers.get("x-cache") == "HIT", "a HIT")
        post(client, "/item/9", "/cart", item="9", count="2")
        done = post(client, "/cart", "/checkout")
        assert done.status_code == 303
        assert re.fullmatch(r"/orders/\d+", done.headers["location"])
        order = client.get(done.headers["location"])
        assert order.status_code == 200
        assert "Thank you" in order.text
        assert "Your cart is empty" in client.get("/cart").text
        assert stock_shown(client, 9) == before - 2
        # The cached page did not outlive the change.
        assert stock_shown(anonymous, 9) == before - 2
    assert catalog.count_orders(database) == 1
    with webtier.open(redis_url, config=webtier.Config(prefix=prefix)) as tier:
        size = tier.stats.get(STATS_CONTEXT, "BasketSize")
        value = tier.stats.get(STATS_CONTEXT, "BasketValue")
    assert (size.count, size.sum) == (1, 2)
    assert value.count == 1
    assert value.sum > 0


def test_checkout_refuses_an_empty_cart_and_missing_stock(shop: str, database: sa.Engine) -> None:
    with browser(shop) as client:
        empty = post(client, "/login", "/checkout")  # a page with a form: the token
        assert empty.status_code == 400
        assert "nothing to check out" in empty.text
        set_stock(database, 11, 1)
        post(client, "/item/12", "/cart", item="12", count="1")
        post(client, "/item/11", "/cart", item="11", count="2")
        refused = post(client, "/cart", "/checkout")
        assert refused.status_code == 409
        assert "Item 11 has fewer than 2" in refused.text
    assert catalog.count_orders(database) == 0
    assert catalog.item(database, 11)["stock"] == 1  # type: ignore[index]


def test_an_order_is_seen_by_its_owner_only(shop: str) -> None:
    with browser(shop) as owner:
        post(owner, "/item/13", "/cart", item="13", count="1")
        where = post(owner, "/cart", "/checkout").headers["location"]
        assert owner.get(where).status_code == 200
    with browser(shop) as stranger:
        assert stranger.get(where).status_code == 404
        post(stranger, "/login", "/login", username="mallory")
        assert stranger.get(where).status_code == 404
    with browser(shop) as user:  # a user's order, from any of the user's sessions
        post(user, "/login", "/login", username="carol")
        post(user, "/item/14", "/cart", item="14", count="1")
        mine = post(user, "/cart", "/checkout").headers["location"]
    with browser(shop) as elsewhere:
        post(elsewhere, "/login", "/login", username="carol")
        assert elsewhere.get(mine).status_code == 200


def test_the_page_cache_serves_every_visitor_their_own_parts(shop: str) -> None:
    with browser(shop) as anonymous:
        first = anonymous.get("/item/15")
        assert first.headers["x-cache"] == "MISS"
        # Popular once its view is counted (the ranking's top 10,000).
        wait_for(lambda: anonymous.get("/item/15").headers["x-cache"] == "HIT", "a HIT")
        with browser(shop) as second:
            other = second.get("/item/15")
        assert other.headers["x-cache"] == "HIT"
        assert token(other) != token(first)  # each visitor's own token in the cached page
    # Visitors with a session get the same cached page, their own name,
    # cart and recently viewed filled in (holes), never another's.
    with browser(shop) as dave, browser(shop) as erin:
        post(dave, "/login", "/login", username="dave")
        post(dave, "/item/15", "/cart", item="15", count="3")
        post(erin, "/login", "/login", username="erin")
        for visitor, name, other in ((dave, "dave", "erin"), (erin, "erin", "dave")):
            page = visitor.get("/item/15")
            assert page.headers["x-cache"] == "HIT"
            assert f'<a href="/account">{name}</a>' in page.text
            assert other not in page.text
            assert token(page) != token(first)
        dave_page = dave.get("/item/15")
        assert '<span class="badge">3</span>' in dave_page.text
        assert 'value="3"' in dave_page.text
        assert "Update cart" in dave_page.text
        assert '<a href="/item/15">item 15</a>' in dave_page.text  # recently viewed
        erin_page = erin.get("/item/15")
        assert "badge" not in erin_page.text
        assert "Add to cart" in erin_page.text


def from_cache(client: httpx.Client, path: str) -> httpx.Response:
    """The first answer to ``path`` that came from the page cache."""
    found: list[httpx.Response] = []

    def hit() -> bool:
        found[:] = [client.get(path)]
        return found[0].headers.get("x-cache") == "HIT"

    wait_for(hit, f"{path} from the page cache")
    return found[0]


def test_the_flash_sale_is_cached_for_every_visitor(shop: str) -> None:
    with browser(shop) as frank, browser(shop) as anonymous:
        post(frank, "/login", "/login", username="frank")
        mine = from_cache(frank, "/flash-sale")
        assert '<a href="/account">frank</a>' in mine.text
        theirs = from_cache(anonymous, "/flash-sale")
        assert "frank" not in theirs.text
        assert '<a href="/login">Log in</a>' in theirs.text


def test_the_home_page_is_cached_for_every_visitor_their_parts_filled(shop: str) -> None:
    with browser(shop) as erin:
        post(erin, "/login", "/login", username="erin")  # leaves her a notice
        noticed = erin.get("/")
        # Rendered for her while the notice waits, never stored; shown once.
        assert noticed.headers["x-cache"] == "MISS"
        assert 'class="notice"' in noticed.text
        assert "Welcome, erin" in noticed.text
        answers: list[httpx.Response] = []

        def from_the_cache() -> bool:
            with browser(shop) as anonymous:
                anonymous.get("/")  # stores the shared page if it is not (2 s)
            answers.append(erin.get("/"))
            return answers[-1].headers["x-cache"] in ("HIT", "STALE")

        wait_for(from_the_cache, "erin's home page from the cache")
        page = answers[-1]  # the shared page, filled for her
        assert "Welcome, erin" in page.text
        assert '<a href="/account">erin</a>' in page.text
        assert 'class="notice"' not in page.text
    with browser(shop) as other:
        page = other.get("/")
    assert "erin" not in page.text
    assert "Log in" in page.text


def test_the_home_page_shows_the_most_and_the_recently_viewed_items(shop: str) -> None:
    with browser(shop) as user:
        post(user, "/login", "/login", username="fay")
        for item in (3, 5, 3, 7):
            assert user.get(f"/item/{item}").status_code == 200

        def sections() -> list[list[str]]:  # the most viewed, the recently viewed
            most, _, recent = user.get("/").text.partition("<h2>Recently viewed</h2>")
            return [re.findall(r'href="/item/(\d+)"', part) for part in (most, recent)]

        assert sections()[1][:3] == ["7", "3", "5"]  # newest first, each once
        # The ranking counts views in batches: the most viewed follow.
        wait_for(lambda: {"3", "5", "7"} <= set(sections()[0]), "the views ranked")


def test_the_account_lists_sessions_and_logs_out_everywhere(shop: str) -> None:
    with browser(shop) as phone, browser(shop) as laptop:
        _log_out_everywhere(phone, laptop)


def _log_out_everywhere(phone: httpx.Client, laptop: httpx.Client) -> None:
    post(phone, "/login", "/login", username="erin")
    post(laptop, "/login", "/login", username="erin")
    account = laptop.get("/account")
    assert account.status_code == 200
    assert account.text.count("<code>") == 2
    assert post(laptop, "/account", "/account/logout-everywhere").status_code == 303
    assert phone.get("/account").headers.get("location") == "/login"
    assert laptop.get("/account").headers.get("location") == "/login"


def test_logout_ends_the_session(shop: str) -> None:
    with browser(shop) as client:
        post(client, "/login", "/login", username="frank")
        assert "frank" in client.get("/").text
        assert post(client, "/", "/logout").status_code == 303
        assert "Log in" in client.get("/").text


def test_the_dashboard_and_metrics_are_served_beside_the_shop(shop: str) -> None:
    """/dashboard and /metrics are webtier's dashboard app, outside the shop's
    middleware: their requests are neither timed nor counted as shop pages."""
    from prometheus_client.parser import text_string_to_metric_families

    with httpx.Client(base_url=shop) as client:
        client.get("/item/3")
        page = client.get("/dashboard/")
        assert page.status_code == 200
        assert "uplot" in page.text.lower()
        health = client.get("/dashboard/api/health")
        assert health.status_code == 200
        # the inventory's refresh lag, as the shop's worker sees its sources
        assert [row["source"] for row in health.json()["rows"]] == [shopdb.SHOP_INVENTORY]
        metrics = client.get("/metrics")
        assert metrics.status_code == 200
        names = {family.name for family in text_string_to_metric_families(metrics.text)}
        assert "webtier_up" in names
        # No shop middleware ran for them: no CSRF or session cookie set.
        assert "set-cookie" not in page.headers
        assert "set-cookie" not in metrics.headers
        assert client.get("/dashboard/api/counters?unknown=1").status_code in (200, 400)
        assert client.get("/item/3").status_code == 200  # the shop still behind it
