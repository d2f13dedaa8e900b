"""Page-cache poisoning (issue #12, item 6), through the real middleware.

A real app -- Starlette under uvicorn, and Flask under Werkzeug's WSGI
server -- reflects the inputs an attacker controls into its page: the query
string, every ``X-*`` and ``Forwarded`` header, the ``theme`` cookie, an API
key. An attacker's request with an input the key does not hold may be
answered from the cache, but its render is never stored: an anonymous
visitor never receives the reflected content.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

import flask
import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from werkzeug.serving import make_server

import webtier
from webtier.config import Config, PageCacheSettings
from webtier.pagecache import CacheRoute, PageRules
from webtier.testing import free_port
from webtier.web import pagecache

HOME = PageRules(routes=(CacheRoute("/"),))
SCRIPT = "<script>alert(1)</script>"


def reflect(
    path: str, query: str, headers: Mapping[str, str], cookies: Mapping[str, str], body: bytes
) -> str:
    """The page: every input an attacker controls, as the app reflects it."""
    if path == "/account":
        return f"account of {headers.get('x-api-key', 'nobody')}"
    parts = [path]
    if query:
        parts.append(f"query={unquote_plus(query)}")  # unescaped, as a careless page would
    parts += [
        f"{name}={value}"
        for name, value in sorted(headers.items())
        if name.startswith("x-") or name == "forwarded"
    ]
    if "theme" in cookies:
        parts.append(f"theme={cookies['theme']}")
    if body:
        parts.append(f"body={body.decode()}")
    return " ".join(parts)


@dataclass
class Site:
    url: str
    renders: list[int] = field(default_factory=lambda: [0])
    lock: threading.Lock = field(default_factory=threading.Lock)

    def render(self) -> str:
        with self.lock:
            self.renders[0] += 1
            return str(self.renders[0])

    def get(
        self, path: str, headers: Mapping[str, str] | None = None, body: bytes | None = None
    ) -> httpx.Response:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            return http.request("GET", path, headers=dict(headers or {}), content=body)


@contextlib.contextmanager
def asgi_site(redis_url: str, config: Config, rules: PageRules) -> Iterator[Site]:
    client = webtier.connect_async(redis_url)
    port = free_port()
    site = Site(f"http://127.0.0.1:{port}")

    async def page(request: Request) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        body = reflect(
            request.url.path, request.url.query, headers, request.cookies, await request.body()
        )
        return PlainTextResponse(body, headers={"x-render": site.render()})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await client.aclose()

    app = Starlette(
        routes=[Route("/", page), Route("/account", page), Route("/item", page)],
        lifespan=lifespan,
    )
    cached = pagecache.ASGIMiddleware(app, webtier.AsyncWebTier(client, config), rules)
    server = uvicorn.Server(
        uvicorn.Config(cached, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        assert time.time() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield site
    finally:
        server.should_exit = True
        thread.join(30)


@contextlib.contextmanager
def wsgi_site(redis_url: str, config: Config, rules: PageRules) -> Iterator[Site]:
    client = webtier.connect(redis_url)
    app = flask.Flask("reflector")
    site = Site("")

    def page() -> flask.Response:
        request = flask.request
        headers = {k.lower(): v for k, v in request.headers.items()}
        query = request.query_string.decode("latin-1")
        body = reflect(request.path, query, headers, request.cookies, request.get_data())
        return flask.Response(body, mimetype="text/plain", headers={"x-render": site.render()})

    for path in ("/", "/account", "/item"):
        app.add_url_rule(path, path, page)
    cached = pagecache.WSGIMiddleware(app.wsgi_app, webtier.WebTier(client, config), rules)
    app.wsgi_app = cached  # type: ignore[method-assign]
    server = make_server("127.0.0.1", 0, app, threaded=True)
    site.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        thread.join(30)
        cached.close()
        webtier.disconnect(client)


OpenSite = Callable[..., Site]


@pytest.fixture(params=["asgi", "wsgi"])
def open_site(request: pytest.FixtureRequest, redis_url: str, prefix: str) -> Iterator[OpenSite]:
    """``open_site(rules, **settings)``: the reflecting app behind the page
    cache (ASGI or WSGI), with page-cache settings of this test's own."""
    kind = str(request.param)
    with contextlib.ExitStack() as stack:

        def open_one(rules: PageRules = HOME, **settings: Any) -> Site:
            config = Config(
                prefix=prefix, pagecache=PageCacheSettings(counters=False, top=10, **settings)
            )
            opener = asgi_site if kind == "asgi" else wsgi_site
            return stack.enter_context(opener(redis_url, config, rules))

        yield open_one


def assert_clean_and_stored(site: Site, path: str, expected: str) -> None:
    """An anonymous visitor gets the clean page, rendered and then stored."""
    first, second = site.get(path), site.get(path)
    assert first.text == expected, "the attacker's render was served to a visitor"
    assert first.headers["x-cache"] == "MISS"
    assert second.text == expected
    assert second.headers["x-cache"] == "HIT", "the clean render was not stored"


# -- the vectors of the issue ----------------------------------------------------------------


def test_a_reflected_dropped_query_parameter_is_never_stored(open_site: OpenSite) -> None:
    site = open_site()
    attack = site.get(f"/?utm_source={SCRIPT}")
    assert SCRIPT in attack.text  # the attacker gets his own render...
    assert attack.headers["x-cache"] == "MISS"
    assert_clean_and_stored(site, "/", "/")  # ...and nobody else does
    # Requests with dropped parameters are still answered from the cache.
    tracked = site.get("/?utm_source=newsletter&fbclid=1")
    assert (tracked.headers["x-cache"], tracked.text) == ("HIT", "/")


UNKEYED_HEADERS = (
    ("x-forwarded-host", "evil.example"),
    ("x-host", "evil.example"),
    ("x-forwarded-server", "evil.example"),
    ("x-forwarded-scheme", "nothttps"),
    ("x-original-url", "/admin"),
    ("x-rewrite-url", "/admin"),
    ("forwarded", "host=evil.example;proto=http"),
    ("x-custom-header", SCRIPT),
)


def test_reflected_forwarded_and_custom_headers_are_never_stored(open_site: OpenSite) -> None:
    site = open_site(PageRules(routes=(CacheRoute("/"),)))
    for number, (name, value) in enumerate(UNKEYED_HEADERS):
        path = f"/?v={number}"
        attack = site.get(path, {name: value})
        assert value in attack.text, name
        assert_clean_and_stored(site, path, f"/ query=v={number}")
        # A request carrying the header is answered from the cache.
        served = site.get(path, {name: value})
        assert (served.headers["x-cache"], served.text) == ("HIT", f"/ query=v={number}"), name


def test_a_reflected_cookie_not_declared_is_never_stored(open_site: OpenSite) -> None:
    site = open_site()
    attack = site.get("/", {"cookie": f"theme={SCRIPT}"})
    assert SCRIPT in attack.text
    assert_clean_and_stored(site, "/", "/")


def test_a_get_with_a_body_is_never_stored(open_site: OpenSite) -> None:
    site = open_site()
    attack = site.get("/", body=SCRIPT.encode())  # a "fat GET"
    assert SCRIPT in attack.text
    assert_clean_and_stored(site, "/", "/")


def test_the_item_rule_applies_only_to_declared_item_routes(
    open_site: OpenSite, sync_client: Any, prefix: str
) -> None:
    webtier.WebTier(sync_client, Config(prefix=prefix)).ranking.record_view("42")
    site = open_site(HOME)  # "/" is cached; no item route is declared
    keyed = site.get("/account?item=42", {"x-api-key": "secret-key"})
    assert keyed.text == "account of secret-key"
    for _ in range(2):
        anonymous = site.get("/account?item=42")
        assert anonymous.text == "account of nobody"
        assert "x-cache" not in anonymous.headers  # not a cached route: left to the app


def test_request_no_cache_is_a_fresh_render_for_that_client_only(open_site: OpenSite) -> None:
    site = open_site()
    assert site.get("/").headers["x-render"] == "1"  # stored
    for headers in ({"pragma": "no-cache"}, {"cache-control": "no-cache"}):
        fresh = site.get("/", headers)
        assert fresh.headers["x-render"] != "1", headers  # rendered for this client...
        assert "x-cache" not in fresh.headers
        kept = site.get("/")
        assert (kept.headers["x-cache"], kept.headers["x-render"]) == ("HIT", "1")  # ...alone
    # A plain reload (max-age=0) is answered from the cache.
    reload = site.get("/", {"cache-control": "max-age=0"})
    assert (reload.headers["x-cache"], reload.headers["x-render"]) == ("HIT", "1")
    assert site.renders[0] == 3


# -- what may still be stored ---------------------------------------------------------------

CHROME = {
    "user-agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/126.0 Safari/537.36",
    "accept": "text/html,application/xhtml+xml,*/*;q=0.8",
    "accept-language": "en-US,en;q=0.9",
    "accept-encoding": "gzip, deflate, br, zstd",
    "referer": "http://shop.test/",
    "sec-ch-ua": '"Chromium";v="126"',
    "sec-ch-ua-mobile": "?0",
    "sec-ch-ua-platform": '"Linux"',
    "sec-fetch-dest": "document",
    "sec-fetch-mode": "navigate",
    "sec-fetch-site": "same-origin",
    "sec-fetch-user": "?1",
    "upgrade-insecure-requests": "1",
    "priority": "u=0, i",
    "cookie": "_ga=GA1.1.123.456; _ga_ABC=GS1.1.1; _gid=GA1.1.789",
}


def test_an_ordinary_browser_request_is_stored(open_site: OpenSite) -> None:
    site = open_site()
    first, second = site.get("/?page=2", CHROME), site.get("/?page=2", CHROME)
    assert [first.headers["x-cache"], second.headers["x-cache"]] == ["MISS", "HIT"]
    assert second.text == "/ query=page=2"


def test_declared_inputs_and_a_trusted_proxys_headers_are_keyed(open_site: OpenSite) -> None:
    site = open_site(
        PageRules(routes=(CacheRoute("/", cookies=("theme",)),)),
        proxy_headers=("x-forwarded-host",),
    )
    proxied = {"x-forwarded-host": "shop.example"}
    assert site.get("/", proxied).headers["x-cache"] == "MISS"
    assert_clean_and_stored(site, "/", "/")
    again = site.get("/", proxied)  # its own copy, under its own key
    assert (again.headers["x-cache"], again.text) == ("HIT", "/ x-forwarded-host=shop.example")
    dark = {"cookie": "theme=dark"}
    assert site.get("/", dark).headers["x-cache"] == "MISS"
    dark_again = site.get("/", dark)
    assert (dark_again.headers["x-cache"], dark_again.text) == ("HIT", "/ theme=dark")
    assert site.get("/").text == "/"
