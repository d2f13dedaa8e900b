"""Page cache without a server: rules, key normalization, the HTTP policy,
copies, and the serve operation fed replies by hand."""

from __future__ import annotations

import dataclasses
import gzip
from typing import Any

import pytest

from tests.helpers.ops import drive
from webtier import pagecache
from webtier._core.protocol import Call, Request, ScriptCall
from webtier.config import Config, PageCacheSettings, RankingSettings
from webtier.errors import ConfigError
from webtier.pagecache import BOOK_RULES, CacheRoute, PageRequest, PageRules, SetAdmission
from webtier.pagecache.copies import decode, encode, make_page
from webtier.pagecache.holes import ANONYMOUS, Holes, Visit
from webtier.pagecache.request import is_private, normalized_query, wants_fresh
from webtier.types import Rendered
from webtier.web.pagecache import policy

CFG = Config(prefix="p")
SETTINGS = CFG.pagecache


def plan_of(url: str, rules: PageRules | None = None, **headers: str) -> Any:
    return (rules or BOOK_RULES).plan(CFG, PageRequest.from_url(url, headers))


# -- rules and keys -------------------------------------------------------------------------


def test_book_rule_item_pages_only_and_not_dynamic() -> None:
    assert plan_of("/item?item=5") is not None
    assert plan_of("/item?item=5&_=1") is None
    assert plan_of("/about") is None
    assert plan_of("/item?item=5&item=6") is None  # ambiguous
    assert plan_of("/item?item=%00bad") is None  # not a valid item name


def test_query_order_and_tracking_params_do_not_split_the_key() -> None:
    a = plan_of("http://h/item?item=5&color=red")
    b = plan_of("http://h/item?color=red&utm_source=x&item=5&gclid=1&fbclid=2")
    c = plan_of("http://h/item?item=5&color=blue")
    assert a.digest == b.digest != c.digest
    assert normalized_query(SETTINGS, [("b", "2"), ("a", "1"), ("b", "1")]) == "a=1&b=2&b=1"


def test_scheme_host_and_path_split_the_key() -> None:
    base = plan_of("http://h/item?item=5").digest
    assert plan_of("https://h/item?item=5").digest != base
    assert plan_of("http://other/item?item=5").digest != base
    assert plan_of("http://h/item2?item=5").digest != base
    assert plan_of("http://H/item?item=5").digest == base


def test_only_declared_vary_headers_join_the_key() -> None:
    rules = PageRules(routes=(CacheRoute("/p/*", vary=("Accept-Language",)),))
    fr = plan_of("/p/x", rules, **{"accept-language": "fr"})
    fr_cookie = plan_of("/p/x", rules, **{"accept-language": "fr", "cookie": "csrftoken=1"})
    de = plan_of("/p/x", rules, **{"accept-language": "de"})
    assert fr.digest == fr_cookie.digest != de.digest
    assert plan_of("/q", rules) is None


def test_items_share_a_shard_and_user_input_never_reaches_a_tag() -> None:
    one = plan_of("/item?item=a%7Db&page=1")
    two = plan_of("/other?item=a%7Db&page=2")
    assert one.shard == two.shard
    assert one.shard.route.startswith("p:{pc:")
    assert one.shard.item("a}b").startswith(one.shard.route + ":item:")
    assert "a}b" not in one.shard.page(one.digest)


def test_private_requests_are_left_alone_unless_the_route_allows() -> None:
    assert is_private(SETTINGS, {"cookie": "theme=dark; sessionid=1"})
    assert is_private(SETTINGS, {"authorization": "Bearer x"})
    assert not is_private(SETTINGS, {"cookie": "csrftoken=1; _ga=2"})
    assert plan_of("/item?item=5", cookie="webtier_session=abc") is None
    shared = PageRules(routes=(CacheRoute("/news", private=True),))
    assert plan_of("/news", shared, authorization="Bearer x") is not None


def test_the_item_rule_applies_only_to_item_routes() -> None:
    rules = PageRules(routes=(CacheRoute("/item", item_pages=True), CacheRoute("/")))
    assert plan_of("/item?item=5", rules).admission is not None
    assert plan_of("/item", rules) is None  # an item route needs its item
    assert plan_of("/account?item=5", rules) is None  # not a declared route
    home = plan_of("/?item=5", rules)
    assert home.admission is None  # a plain route is admitted by itself...
    assert home.shard == plan_of("/item?item=5", rules).shard  # ...in its item's shard


def test_an_item_in_the_path_is_the_pages_item_and_no_other() -> None:
    rules = PageRules(routes=(CacheRoute("/item/*", item_pages=True, item_in_path=True),))
    page = plan_of("/item/42", rules)
    assert (page.item, page.admission is not None) == ("42", True)
    variant = plan_of("/item/42?item=42&utm_source=x", rules)
    assert variant.item == "42"  # a key of its own, among item 42's pages
    assert variant.shard == page.shard
    assert variant.digest != page.digest
    # The path and the query name two items: neither's page, never stored.
    assert plan_of("/item/42?item=41", rules) is None
    assert plan_of("/item/42?item=42&item=41", rules) is None
    for no_item in ("/item/", "/item/42/more"):
        assert plan_of(no_item, rules) is None
    for misdeclared in (
        {"path": "/item/*"},  # not an item route
        {"path": "/item/*/x", "item_pages": True},
        {"path": "/item", "item_pages": True},
    ):
        with pytest.raises(ConfigError):
            CacheRoute(item_in_path=True, **misdeclared)  # type: ignore[arg-type]


def unkeyed(url: str, rules: PageRules | None = None, **headers: str) -> tuple[str, ...]:
    plan = plan_of(url, rules or HOME, **headers)
    assert plan is not None
    assert plan.storable == (not plan.unkeyed)
    return plan.unkeyed  # type: ignore[no-any-return]


HOME = PageRules(routes=(CacheRoute("/"),))
BROWSER = {
    "user-agent": "Mozilla/5.0",
    "accept": "text/html,*/*;q=0.8",
    "accept-language": "fr",
    "accept-encoding": "gzip, br",
    "referer": "https://shop.example/",
    "sec-fetch-mode": "navigate",
    "sec-ch-ua-mobile": "?0",
    "upgrade-insecure-requests": "1",
    "if-none-match": 'W/"x"',
    "cache-control": "max-age=0",
    "cookie": "_ga=GA1.2.3; _ga_X1=GS1; _gid=1",
    "connection": "keep-alive",
    "host": "shop.example",
}


def test_a_browser_request_may_be_stored() -> None:
    assert unkeyed("/?page=2&q=a%20b", **BROWSER) == ()
    assert unkeyed("/?next=/a/b&list[]=1&x=(1)") == ()  # characters browsers leave as they are


def test_inputs_the_key_lacks_keep_a_render_from_being_stored() -> None:
    assert unkeyed("/?utm_source=x&fbclid=1&page=2") == ("query utm_source", "query fbclid")
    assert unkeyed("/?q=<script>") == ("query characters",)
    assert unkeyed("/?q=\u00e9'") == ("query characters",)
    assert unkeyed("/", **{"x-forwarded-host": "evil", "x-api-key": "k"}) == (
        "header x-forwarded-host",
        "header x-api-key",
    )
    assert unkeyed("/", cookie="theme=dark; _ga=1; csrftoken=t") == (
        "cookie theme",
        "cookie csrftoken",
    )
    assert unkeyed("/", **{"cache-control": "no-store"}) == ("cache-control no-store",)
    assert unkeyed("/", **{"content-length": "9"}) == ("header content-length",)  # a fat GET
    assert unkeyed("/", **{"content-length": "0"}) == ()
    # The key does not change: the same page is looked up (and served).
    assert plan_of("/", HOME, **{"x-forwarded-host": "evil"}).digest == plan_of("/", HOME).digest


def test_declared_inputs_are_in_the_key() -> None:
    route = CacheRoute("/", vary=("X-Forwarded-Host",), cookies=("theme",))
    rules = PageRules(routes=(route,))
    evil = plan_of("/", rules, **{"x-forwarded-host": "evil"})
    assert evil.unkeyed == ()
    assert evil.digest != plan_of("/", rules).digest
    dark = plan_of("/", rules, cookie="theme=dark; _ga=1")
    assert dark.unkeyed == ()
    light = plan_of("/", rules, cookie="theme=light")
    none = plan_of("/", rules, cookie="_ga=1")
    assert len({dark.digest, light.digest, none.digest}) == 3
    assert none.digest == plan_of("/", rules).digest
    # A trusted proxy's headers join every key.
    config = Config(prefix="p", pagecache=PageCacheSettings(proxy_headers=("X-Forwarded-Host",)))
    proxied = HOME.plan(config, PageRequest.from_url("/", {"x-forwarded-host": "a"}))
    other = HOME.plan(config, PageRequest.from_url("/", {"x-forwarded-host": "b"}))
    assert proxied is not None
    assert other is not None
    assert proxied.storable
    assert proxied.digest != other.digest
    assert proxied.vary == ("x-forwarded-host",)


def test_a_route_says_which_headers_and_cookies_it_ignores() -> None:
    strict = PageRules(routes=(CacheRoute("/", ignored_headers=("User-Agent",)),))
    assert unkeyed("/", strict, **{"user-agent": "x"}) == ()
    assert unkeyed("/", strict, referer="x") == ("header referer",)
    lax = PageRules(
        routes=(CacheRoute("/", ignored_headers=("x-request-*",), ignored_cookies=("ab",)),)
    )
    assert unkeyed("/", lax, **{"x-request-id": "1"}, cookie="ab=1") == ()
    assert unkeyed("/", lax, cookie="_ga=1") == ("cookie _ga",)
    # A route the same for signed-in users ignores their credentials too.
    shared = PageRules(routes=(CacheRoute("/", private=True),))
    assert unkeyed("/", shared, authorization="Bearer x", cookie="sessionid=1") == ()


def test_no_cache_requests_go_to_the_app() -> None:
    assert wants_fresh({"cache-control": "no-cache"})
    assert wants_fresh({"pragma": "no-cache"})
    assert not wants_fresh({"cache-control": "max-age=0"})
    assert not wants_fresh({"cache-control": "max-age=0", "pragma": "no-cache"})  # RFC 9111 5.4
    assert plan_of("/", HOME, pragma="no-cache") is None
    ignoring = Config(prefix="p", pagecache=PageCacheSettings(honor_no_cache=False))
    assert HOME.plan(ignoring, PageRequest.from_url("/", {"pragma": "no-cache"})) is not None


def test_admission_is_pluggable() -> None:
    top = {"5"}
    rules = PageRules(BOOK_RULES.routes, admission=SetAdmission(top.__contains__))
    plan = plan_of("/item?item=5", rules)
    assert plan.admission.requests(CFG, "5") == ()
    assert plan.admission.admits(CFG, "5", [])
    assert not plan.admission.admits(CFG, "6", [])


def test_settings_and_routes_are_checked() -> None:
    for bad in ({"ttl": -1}, {"shards": 0}, {"private_cookies": {"x"}}, {"item_param": "_"}):
        with pytest.raises(ConfigError):
            PageCacheSettings(**bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        CacheRoute("/x", vary="cookie")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        CacheRoute("/x", ttl=0)
    bad_routes: list[dict[str, Any]] = [
        {"cookies": "theme"},
        {"cookies": ("a=b",)},
        {"ignored_headers": ("bad header",)},
        {"ignored_cookies": ["x"]},
        {"item_pages": 1},
        {"render_for": lambda visit: True},  # a render for some visitors needs holes
        {"holes": True, "render_for": "notices"},
    ]
    for bad_route in bad_routes:
        with pytest.raises(ConfigError):
            CacheRoute("/x", **bad_route)
    for bad_setting in (
        {"ignored_headers": ("user-agent",)},
        {"proxy_headers": frozenset({"x-forwarded-host"})},
        {"proxy_headers": ("x-forwarded-*",)},
        {"ignored_cookies": frozenset({""})},
        {"honor_no_cache": "yes"},
    ):
        with pytest.raises(ConfigError):
            PageCacheSettings(**bad_setting)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        PageRules(routes=[CacheRoute("/")])  # type: ignore[arg-type]
    settings = PageCacheSettings(ignored_headers=frozenset({"X-A"}), proxy_headers=("B", "a"))
    assert settings.ignored_headers == {"x-a"}
    assert settings.proxy_headers == ("a", "b")


# -- HTTP policy ------------------------------------------------------------------------------


OK = (("content-type", "text/html"), ("content-length", "3"))


@pytest.mark.parametrize(
    ("status", "extra", "stored"),
    [
        (200, (), 300.0),
        (404, (), None),
        (200, (("set-cookie", "a=1"),), None),
        (200, (("cache-control", "private"),), None),
        (200, (("cache-control", "no-store"),), None),
        (200, (("cache-control", "public, max-age=60"),), 60.0),
        (200, (("cache-control", "max-age=0"),), None),
        (200, (("cache-control", "max-age=9999"),), 300.0),
        (200, (("vary", "Cookie"),), None),
        (200, (("vary", "*"),), None),
        (200, (("vary", "Accept-Encoding"),), 300.0),
        (200, (("content-encoding", "br"),), None),
        (200, (("content-length", str(5 * 1024 * 1024)),), None),  # over max_body
    ],
)
def test_what_is_stored(status: int, extra: tuple[tuple[str, str], ...], stored: Any) -> None:
    assert policy.store_ttl(SETTINGS, plan_of("/item?item=1"), status, OK + extra) == stored


def test_streamed_responses_are_not_stored() -> None:
    headers = (("content-type", "text/plain"),)
    assert policy.store_ttl(SETTINGS, plan_of("/item?item=1"), 200, headers) is None


def test_copies_round_trip_compressed_when_it_pays() -> None:
    big = Rendered(200, (*OK, ("set-cookie-not", "x")), b"abc" * 1000, 300.0)
    page = make_page(CFG, big, 300.0, 1000.0)
    assert page.gzipped
    assert len(page.body) < 200
    back = decode(encode(page))
    assert back == page
    assert back is not None
    assert back.plain_body() == b"abc" * 1000
    small = make_page(CFG, Rendered(200, OK, b"abc", 300.0), 300.0, 1000.0)
    assert not small.gzipped
    assert decode(b"WPASS") is None


def test_page_response_gzip_304_and_headers() -> None:
    page = make_page(CFG, Rendered(200, OK, b"x" * 5000, 300.0), 300.0, 1000.0)
    status, headers, body = policy.page_response(page, {"accept-encoding": "gzip"}, "HIT", 1010)
    names = dict(headers)
    assert status == 200
    assert names["content-encoding"] == "gzip"
    assert names["x-cache"] == "HIT"
    assert names["age"] == "10"
    assert names["content-length"] == str(len(body))
    status, headers, body = policy.page_response(page, {"accept-encoding": "gzip;q=0"}, "HIT")
    assert body == b"x" * 5000
    assert "content-encoding" not in dict(headers)
    status, headers, body = policy.page_response(page, {"if-none-match": page.etag}, "STALE")
    assert (status, body) == (304, b"")
    assert dict(headers)["x-cache"] == "STALE"


def test_outage_log_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    log = policy.Policy(CFG, HOME).outage
    for _ in range(5):
        log.failed(RuntimeError("down"))
    assert len(caplog.records) == 1


def test_unkeyed_inputs_are_reported_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    rules = policy.Policy(CFG, HOME)
    with caplog.at_level("INFO", logger="webtier.pagecache"):
        rules.plan(PageRequest.from_url("/?utm_source=x"))  # expected: not reported
        assert not caplog.records
        for _ in range(5):
            rules.plan(PageRequest.from_url("/", {"x-amzn-trace-id": "Root=1"}))
    assert len(caplog.records) == 1
    assert "'header x-amzn-trace-id'" in caplog.records[0].getMessage()
    with pytest.raises(ConfigError):
        policy.Policy(CFG, None)  # type: ignore[arg-type]


# -- the serve operation, replies by hand -----------------------------------------------------


def render_call(rendered: Rendered) -> Call:
    return Call(lambda: rendered)


def test_a_hit_is_one_round_trip() -> None:
    plan = plan_of("/item?item=1")
    page = make_page(CFG, Rendered(200, OK, b"abc", 300.0), 300.0, 4e9)
    served, sent = drive(
        pagecache.ops.serve(CFG, plan, render_call(PAGE_R)), [[[encode(page)], [0]]], run_calls=True
    )
    assert served.outcome == "HIT"
    assert len(sent) == 1
    get, rank = sent[0]  # the page and the item's rank, together
    assert get.commands == (("GET", plan.shard.page(plan.digest)),)
    assert rank.commands[0][0] == "ZREVRANK"


PAGE_R = Rendered(200, OK, b"new", 300.0)


def test_a_miss_of_an_admitted_item_claims_renders_and_stores() -> None:
    plan = plan_of("/item?item=1")
    served, sent = drive(
        pagecache.ops.serve(CFG, plan, render_call(PAGE_R)),
        [[[None], [0]], [[b"render", b"3"]], [b"stored"]],
        run_calls=True,
    )
    assert served.outcome == "MISS"
    assert served.page.plain_body() == b"new"
    claim = sent[1]  # the rank came with the lookup: the claim alone
    assert claim.commands[0].script.name == "pagecache_claim"
    store = sent[-1]
    assert isinstance(store, Request)
    call = store.commands[0]
    assert isinstance(call, ScriptCall)
    assert call.script.name == "pagecache_store"
    assert call.args[1] == "3"  # the generation the claim returned


def test_an_unpopular_item_is_rendered_without_the_cache() -> None:
    plan = plan_of("/item?item=1")
    served, sent = drive(
        pagecache.ops.serve(CFG, plan, render_call(PAGE_R)),
        [[[None], [None]]],
        run_calls=True,
    )
    assert served.outcome == "MISS"
    assert served.rendered is PAGE_R
    assert len(sent) == 2  # the lookup with the rank, then the render: no lock taken
    assert isinstance(sent[1], Call)


def test_a_waiter_gets_the_page_the_holder_stored() -> None:
    plan = plan_of("/item?item=1")
    page = make_page(CFG, PAGE_R, 300.0, 4e9)
    served, sent = drive(
        pagecache.ops.serve(CFG, plan, render_call(PAGE_R)),
        [[[None], [0]], [[b"wait", 900]], [[b"hit", encode(page)]]],
        run_calls=True,
    )
    assert served.outcome == "HIT"
    assert isinstance(sent[2], Call)  # paused between two claims


def test_a_stale_copy_is_served_while_another_renders() -> None:
    plan = plan_of("/item?item=1")
    stale = make_page(CFG, PAGE_R, 1.0, 1000.0)
    served, _ = drive(
        pagecache.ops.serve(CFG, plan, render_call(PAGE_R)),
        [[[encode(stale)], [0]], [[b"wait", 5]]],
        run_calls=True,
    )
    assert served.outcome == "STALE"
    assert served.page == stale


def test_a_request_with_unkeyed_inputs_never_claims_nor_stores() -> None:
    plan = plan_of("/item?item=1&utm_source=x")
    assert not plan.storable
    served, sent = drive(
        pagecache.ops.serve(CFG, plan, render_call(PAGE_R)), [[None]], run_calls=True
    )
    assert (served.outcome, served.rendered) == ("MISS", PAGE_R)
    assert len(sent) == 2
    assert isinstance(sent[1], Call)
    fresh = make_page(CFG, PAGE_R, 300.0, 4e9)
    served, sent = drive(
        pagecache.ops.serve(CFG, plan, render_call(PAGE_R)), [[encode(fresh)]], run_calls=True
    )
    assert (served.outcome, len(sent)) == ("HIT", 1)
    stale = make_page(CFG, PAGE_R, 1.0, 1000.0)
    served, sent = drive(
        pagecache.ops.serve(CFG, plan, render_call(PAGE_R)), [[encode(stale)]], run_calls=True
    )
    assert (served.outcome, served.page, len(sent)) == ("STALE", stale, 1)  # nobody renders
    served, sent = drive(
        pagecache.ops.serve(CFG, plan, render_call(PAGE_R)), [[b"WPASS"]], run_calls=True
    )
    assert served.rendered is PAGE_R
    assert policy.store_ttl(SETTINGS, plan, 200, OK) is None


def test_a_response_not_storable_leaves_a_pass_note() -> None:
    plan = plan_of("/item?item=1")
    private = Rendered(200, OK, b"mine", None)
    served, sent = drive(
        pagecache.ops.serve(CFG, plan, render_call(private)),
        [[[None], [0]], [[b"render", b"0"]], [b"stored"]],
        run_calls=True,
    )
    assert served.rendered is private
    assert sent[-1].commands[0].args[2] == b"WPASS"
    # A pass note sends the next request straight to the app, no lock.
    served, sent = drive(
        pagecache.ops.serve(CFG, plan, render_call(private)), [[[b"WPASS"], [0]]], run_calls=True
    )
    assert served.rendered is private
    assert len(sent) == 2


def test_an_invalidation_sets_a_new_generation_that_expires() -> None:
    plan = plan_of("/item?item=1")
    life = pagecache.invalidation.generation_life(CFG)
    assert life == (10 + 300 + 60) * 1000  # lock lease + the longest page life
    _, sent = drive(
        pagecache.invalidation.invalidate_plan(CFG, plan), [[b"OK", 1, 1, 1]], run_calls=True
    )
    first = sent[0].commands[0]
    _, sent = drive(pagecache.invalidation.invalidate_item(CFG, "1"), [[b"OK", []]], run_calls=True)
    second = sent[0].commands[0]
    for command in (first, second):
        assert command[:2] == ("SET", plan.shard.gen)
        assert command[3:] == ("PX", life)
    assert first[2] != second[2]  # never a value seen before: a counter would come back


def test_a_wsgi_request_shows_its_body_headers() -> None:
    from webtier.web.pagecache.wsgi import environ_request

    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/",
        "QUERY_STRING": "",
        "CONTENT_LENGTH": "9",
        "CONTENT_TYPE": "",
        "HTTP_HOST": "shop.test",
        "HTTP_X_FORWARDED_HOST": "evil",
    }
    request = environ_request(environ)
    assert request.headers == {
        "host": "shop.test",
        "x-forwarded-host": "evil",
        "content-length": "9",
    }
    assert HOME.plan(CFG, request).unkeyed == ("header x-forwarded-host", "header content-length")


def test_with_shards_the_rank_follows_up_only_when_its_shard_place_admits() -> None:
    cfg = Config(prefix="p", ranking=RankingSettings(shards=4))
    plan = plan_of("/item?item=1")
    # Third in its shard, 7 views: the other 3 shards' counts follow; 10 in all.
    served, sent = drive(
        pagecache.ops.serve(cfg, plan, render_call(PAGE_R)),
        [[[None], [2, b"7"]], [[3], [4], [1]], [[b"render", b"3"]], [b"stored"]],
        run_calls=True,
    )
    assert served.outcome == "MISS"
    assert [request.commands[0][0] for request in sent[1]] == ["ZCOUNT"] * 3
    assert sent[-1].commands[0].script.name == "pagecache_store"  # admitted: 10 < 10,000
    # Past the top in its own shard: no follow-up, not admitted.
    far = dataclasses.replace(cfg, pagecache=PageCacheSettings(top=2))
    served, sent = drive(
        pagecache.ops.serve(far, plan, render_call(PAGE_R)),
        [[[None], [2, b"7"]]],
        run_calls=True,
    )
    assert len(sent) == 2  # no follow-up, no claim: the render
    assert served.rendered is PAGE_R


# -- the pages a process keeps prepared ---------------------------------------------------------


def test_a_hot_page_is_decoded_once_per_stored_copy() -> None:
    hot = policy.HotPages(entries=2)
    copy = encode(make_page(CFG, Rendered(200, OK, b"x" * 5000, 300.0), 300.0, 1000.0))
    first = hot.get("a", copy)
    assert first is not None
    assert hot.get("a", bytes(copy)) is first  # the same bytes: nothing decoded again
    stored_again = encode(make_page(CFG, Rendered(200, OK, b"y" * 5000, 300.0), 300.0, 1001.0))
    second = hot.get("a", stored_again)
    assert second is not None
    assert second is not first
    assert second.response({}, "HIT", 1001.0)[2] == b"y" * 5000  # the new page, unpacked
    assert hot.get("a", b"WPASS") is None  # a pass note


def test_hot_pages_keep_at_most_their_entries_and_no_large_copy() -> None:
    small = encode(make_page(CFG, Rendered(200, OK, b"abc", 300.0), 300.0, 1000.0))
    hot = policy.HotPages(entries=2, max_bytes=len(small))
    for digest in ("a", "b", "c"):
        hot.get(digest, small)
    assert list(hot._pages) == ["b", "c"]  # the oldest went first
    large = encode(make_page(CFG, Rendered(200, OK, b"abcd", 300.0), 300.0, 1000.0))
    assert hot.get("d", large) is not None  # answered, not kept
    assert "d" not in hot._pages


def test_a_prepared_page_answers_as_page_response_does() -> None:
    page = make_page(
        CFG, Rendered(200, (*OK, ("vary", "Accept-Language")), b"x" * 5000, 300.0), 300.0, 1000.0
    )
    for request in ({}, {"accept-encoding": "gzip"}, {"if-none-match": page.etag}):
        assert policy.Prepared(page).response(request, "HIT", 1010.0) == policy.page_response(
            page, request, "HIT", 1010.0
        )


def test_a_page_with_holes_is_filled_once_for_every_visitor_without_a_session() -> None:
    made: list[str | None] = []

    def who(visit: Visit) -> str:
        made.append(visit.user)
        return visit.user or "guest"

    holes = Holes({"who": who})
    body = b"<p>" + holes.mark("who").encode() + b"</p>" + b"x" * 3000
    plain, places = holes.split(body)
    page = make_page(CFG, Rendered(200, OK, plain, 300.0, holes=places), 300.0, 1000.0)
    prepared = policy.Prepared(page)
    gzip_asked = {"accept-encoding": "gzip"}

    first = prepared.response({}, "HIT", 1010.0, ANONYMOUS, holes)
    assert first[2].startswith(b"<p>guest</p>")
    assert prepared.response({}, "HIT", 1011.0, ANONYMOUS, holes)[2] == first[2]
    packed = prepared.response(gzip_asked, "HIT", 1011.0, ANONYMOUS, holes)[2]
    assert gzip.decompress(packed) == first[2]
    assert prepared.response(gzip_asked, "HIT", 1012.0, ANONYMOUS, holes)[2] is packed
    etag = dict(first[1])["etag"]
    assert prepared.response({"if-none-match": etag}, "HIT", 1012.0, ANONYMOUS, holes)[0] == 304
    assert made == [None]  # filled once for all of them

    # A visitor's own parts, every time; never kept for the visitors without one.
    for _ in range(2):
        ann = prepared.response(gzip_asked, "HIT", 1013.0, Visit(user="ann"), holes)
        assert gzip.decompress(ann[2]).startswith(b"<p>ann</p>")
    assert prepared.response({}, "HIT", 1014.0, ANONYMOUS, holes)[2] == first[2]
    assert made == [None, "ann", "ann"]

    # Another layer's holes (another app on the same page): its own fills.
    other = Holes({"who": lambda visit: "someone"})
    assert prepared.response({}, "HIT", 1015.0, ANONYMOUS, other)[2].startswith(b"<p>someone</p>")
