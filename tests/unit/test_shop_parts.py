"""The demo shop's parts that need no Redis: its settings, its page rules,
the login's merge report, and the catalog on an in-memory SQLite."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

# The shop is a Starlette app (webtier[shop]): without it, as with only the
# non-web part of .[test], this module skips (a failure in CI).
pytest.importorskip("starlette")

import webtier
from webtier.demo import shopdb
from webtier.demo.shop import ShopSettings, catalog
from webtier.demo.shop.accounts import merge_report
from webtier.demo.shop.app import HOME_TTL, PAGE_RULES
from webtier.errors import ConfigError, InvalidInput, OutOfStock
from webtier.pagecache import PageRequest
from webtier.pagecache.holes import Visit
from webtier.types import CartChange


@pytest.mark.parametrize(
    "bad",
    [
        {"items": 0},
        {"items": True},
        {"run_jobs": 1},
        {"session_cap": 0},
        {"flash_refresh": 0},
        {"view_flush": float("nan")},
        {"secret": b"short"},
        {"secret": "a text of more than thirty-two characters"},
        {"most_viewed": 0},
    ],
)
def test_settings_refuse_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ShopSettings(**bad)  # type: ignore[arg-type]


def test_the_home_page_is_cached_briefly_and_for_no_item() -> None:
    plan = PAGE_RULES.plan(webtier.Config(), PageRequest("GET", "/", host="shop"))
    assert plan is not None
    assert (plan.item, plan.admission, plan.ttl) == (None, None, HOME_TTL)
    # A visitor with a session: the same page, their parts filled (holes),
    # but rendered for them while a notice waits in their session.
    private = PageRequest("GET", "/", host="shop", headers={"cookie": "webtier_session=x"})
    theirs = PAGE_RULES.plan(webtier.Config(), private)
    assert theirs is not None
    assert theirs.holes
    assert theirs.renders(Visit(data={"notices": ["Welcome back"]}))
    assert not theirs.renders(Visit(user="erin", data={"notices": []}))


def test_an_item_path_is_the_books_item_page() -> None:
    config = webtier.Config()
    plan = PAGE_RULES.plan(config, PageRequest("GET", "/item/42", host="shop"))
    assert plan is not None
    assert plan.item == "42"
    assert plan.admission is not None  # the top-10,000 rule
    other = PAGE_RULES.plan(config, PageRequest("GET", "/item/43", host="shop"))
    assert other is not None
    assert other.digest != plan.digest
    for path in ("/cart", "/item/42/more"):
        assert PAGE_RULES.plan(config, PageRequest("GET", path, host="shop")) is None
    # The flash sale: for every visitor (holes), half a second.
    flash = PAGE_RULES.plan(config, PageRequest("GET", "/flash-sale", host="shop"))
    assert flash is not None
    assert (flash.holes, flash.ttl, flash.item) == (True, 0.5, None)
    assert PAGE_RULES.plan(config, PageRequest("POST", "/item/42", host="shop")) is None
    with_query = PAGE_RULES.plan(config, PageRequest("GET", "/item/42", "x=1", host="shop"))
    assert with_query is not None
    assert with_query.item == "42"  # among item 42's pages: its checkout drops it too
    other_item = PageRequest("GET", "/item/42", "item=41", host="shop")
    assert PAGE_RULES.plan(config, other_item) is None  # whose page would it be?


def test_the_merge_report_says_what_the_login_did() -> None:
    assert merge_report("ann", {}, {}) == "Welcome, ann."
    came = merge_report("ann", {"7": 2}, {"7": 2}, (CartChange("7", 0, 2),))
    assert came == "Welcome, ann. Your cart came with you: item 7 \u00d72 (2 from this visit)."
    merged = merge_report(
        "ann", {"7": 2, "10": 3}, {"7": 2, "10": 4}, (CartChange("10", 1, 4), CartChange("7", 0, 2))
    )
    assert merged == (
        "Welcome, ann. Your cart and your account's were merged: "
        "item 7 \u00d72 (2 from this visit), "
        "item 10 \u00d74 (3 from this visit + 1 from your account)."
    )


def test_the_merge_report_names_the_accounts_lines_that_join_the_cart() -> None:
    # No item in common: the account's item 3 joins this visit's cart, which
    # changes this visit's cart though not the account's.
    report = merge_report("ann", {"1": 2}, {"1": 2, "3": 1}, (CartChange("1", 0, 2),))
    assert report == (
        "Welcome, ann. Your cart and your account's were merged: "
        "item 1 \u00d72 (2 from this visit), item 3 \u00d71 (1 from your account)."
    )
    # An empty visit: the account's cart is back, and says so.
    back = merge_report("ann", {}, {"3": 1})
    assert back.endswith("were merged: item 3 \u00d71 (1 from your account).")
    # A line the merge dropped (over a limit) is named too.
    dropped = merge_report("ann", {"5": 1}, {}, ())
    assert dropped.endswith("were merged: item 5 removed (1 from this visit).")


@pytest.fixture
def engine() -> sa.Engine:
    made = sa.create_engine("sqlite://")
    shopdb.create(made, 20)
    with made.begin() as conn:
        conn.execute(shopdb.inventory.update().values(stock=5))
    return made


def test_an_order_takes_the_stock_and_keeps_its_lines(engine: sa.Engine) -> None:
    placed = catalog.place_order(engine, {3: 2, 1: 1}, username="ann")
    assert placed.items == 3
    assert [line.item_id for line in placed.lines] == [1, 3]
    assert placed.total == sum(line.price * line.count for line in placed.lines)
    assert catalog.item(engine, 3)["stock"] == 3  # type: ignore[index]
    assert catalog.order(engine, placed.order_id) == placed
    assert catalog.order(engine, placed.order_id + 1) is None
    assert catalog.count_orders(engine) == 1
    assert set(catalog.items(engine, [1, 3, 99])) == {1, 3}


@pytest.mark.parametrize("lines", [{1: 1, 2: 6}, {1: 1, 99: 1}])
def test_an_order_short_of_stock_writes_nothing(engine: sa.Engine, lines: dict[int, int]) -> None:
    with pytest.raises(OutOfStock) as caught:
        catalog.place_order(engine, lines)
    short = max(lines)
    assert caught.value.item_id == short
    assert str(caught.value) == (
        f"item {short}: fewer than {lines[short]} in stock; no order was placed"
    )
    assert catalog.item(engine, 1)["stock"] == 5  # type: ignore[index]
    assert catalog.count_orders(engine) == 0


def test_an_empty_order_is_refused(engine: sa.Engine) -> None:
    with pytest.raises(InvalidInput):
        catalog.place_order(engine, {1: 0})


def test_a_checkout_key_places_one_order(engine: sa.Engine) -> None:
    with pytest.raises(OutOfStock):
        catalog.check_out(engine, "k1", {1: 6})  # refused: the key stays free
    first = catalog.check_out(engine, "k1", {1: 2}, username="ann")
    assert first.new
    again = catalog.check_out(engine, "k1", {2: 1})  # whatever the lines: the key's order
    assert (again.new, again.order) == (False, first.order)
    assert catalog.checkout_order(engine, "k1") == first.order
    assert catalog.checkout_order(engine, "k2") is None
    assert catalog.count_orders(engine) == 1
    assert catalog.item(engine, 1)["stock"] == 3  # type: ignore[index]
