"""Route templates of requests Starlette's router never saw (the page cache
answered them): matched again from the top, and the match kept for the
same request's next time, by everything a match reads."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Host, Mount, Route

from webtier.web.timing.part import starlette_route


def page(request: Any) -> PlainTextResponse:
    return PlainTextResponse("page")


def unrouted(app: Starlette, path: str, host: str = "shop.test", method: str = "GET") -> Any:
    """The scope of a request answered before the app's router ran."""
    return {
        "type": "http",
        "app": app,
        "path": path,
        "root_path": "",
        "method": method,
        "headers": [(b"host", host.encode())],
    }


def test_a_request_the_router_never_saw_gets_its_template_every_time() -> None:
    shop = Starlette(routes=[Route("/item/{item_id}", page), Route("/", page)])
    admin = Starlette(routes=[Route("/dash", page)])
    app = Starlette(
        routes=[
            Host("admin.shop.test", admin),
            Mount("/api", routes=[Route("/users/{uid}", page)]),
            Mount("", shop),
        ]
    )
    for _ in range(2):  # matched, then as kept
        assert starlette_route(unrouted(app, "/item/7")) == "/item/{item_id}"
        assert starlette_route(unrouted(app, "/api/users/3")) == "/api/users/{uid}"
        assert starlette_route(unrouted(app, "/dash", host="admin.shop.test")) == "/dash"
        assert starlette_route(unrouted(app, "/dash")) is None  # another host: no route
        assert starlette_route(unrouted(app, "/item/7", method="POST")) == "/item/{item_id}"


def test_a_route_added_later_is_matched() -> None:
    app = Starlette(routes=[Route("/", page)])
    assert starlette_route(unrouted(app, "/later")) is None
    app.router.routes.append(Route("/later", page))
    assert starlette_route(unrouted(app, "/later")) == "/later"


def test_two_apps_never_share_a_template() -> None:
    for number in range(50):  # apps made and dropped: ids come again
        app = Starlette(routes=[Route(f"/{number}/{{part}}", page)])
        assert starlette_route(unrouted(app, f"/{number}/x")) == f"/{number}/{{part}}"


def test_a_long_path_is_matched_and_not_kept() -> None:
    from webtier.web.timing.part import _MATCHED

    app = Starlette(routes=[Mount("/static", routes=[Route("/{path:path}", page)])])
    long_path = "/static/" + "x" * 5000
    kept = len(_MATCHED._known)
    assert starlette_route(unrouted(app, long_path)) == "/static/{path}"
    assert len(_MATCHED._known) == kept
