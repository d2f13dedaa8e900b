"""Every python block of every page of docs/, run as it stands (see
:mod:`tests.helpers.examples`): each page in order, its blocks sharing one
namespace, on a server and a Cluster of the suite's own; then a request
through every route of every app the page made, answered without an error.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.helpers import shop
from tests.helpers.examples import (
    NO_ROUTE,
    ROOT,
    addresses,
    answer_every_route,
    apps,
    async_tiers,
    examples,
    given,
    in_place,
    run,
    stock_shop_db,
)
from webtier.testing import RedisCluster, RedisServer

SHOP = "http://127.0.0.1:8000"  # the address pages give the demo shop
PAGES = sorted(p for p in (ROOT / "docs").glob("*.md") if examples(p))


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The examples run in a folder of the test's own, the embedded
    server's data in it too, with the reader's ``shop.db``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("WEBTIER_DASHBOARD_TOKEN", "a-token-of-the-test's-own")
    stock_shop_db()
    return tmp_path


def shop_db() -> sa.Engine:
    return shop.stocked(sa.create_engine("sqlite:///served-shop.db"))


def test_the_pages_have_examples_and_few_are_not_run() -> None:
    blocks = [e for page in PAGES for e in examples(page)]
    assert len(blocks) >= 20, "the pages' examples were not found"
    not_run = [str(e) for e in blocks if e.not_run]
    assert len(not_run) <= 2, f"too many examples marked not run: {not_run}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_example_of_the_page_runs(
    page: Path, fresh_server: RedisServer, cluster: RedisCluster, folder: Path
) -> None:
    replaced = addresses(fresh_server, cluster)
    made: dict[int, Any] = {}
    tiers: dict[int, Any] = {}
    with contextlib.ExitStack() as stack:
        namespace = stack.enter_context(given(fresh_server))
        if SHOP in page.read_text():  # the page drives a shop: the suite serves one
            replaced[SHOP] = stack.enter_context(shop.serving(fresh_server.url, "shop", shop_db()))
        for example in examples(page):
            run(dataclasses.replace(example, source=in_place(example.source, replaced)), namespace)
            made |= apps(namespace)
            tiers |= async_tiers(namespace)
        statuses = answer_every_route(made, tiers)
    # Refused by design (a credential, a CSRF token missing) is an answer; a
    # wrong method or input and a server error are not, nor "not found" but
    # from an app with no route.
    failed = {
        request: status
        for request, status in statuses.items()
        if status >= 400
        and status not in (401, 403)
        and not (status == 404 and NO_ROUTE in request)
    }
    assert not failed, f"{page.name}: requests answered with an error: {failed}"
