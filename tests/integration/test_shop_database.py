"""The shop's SQL database in trouble: locked by another process, moved
away, broken. The visitor gets a 503 page saying so (never a 500), no empty
database is made in the file's place, and the shop recovers by itself when
the database is back. And two shops making one fresh database at once make
its inventory once."""

from __future__ import annotations

import concurrent.futures
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from rich.console import Console

from tests.helpers.shop import browser, checkout_form, order_of, post, serving, stocked
from webtier.demo import shopdb
from webtier.demo.serve import prepare_database
from webtier.demo.shop import catalog
from webtier.errors import ConfigError

SQLITE = pytest.mark.parametrize("database", ["sqlite"], indirect=True)


@pytest.fixture
def shop_file(database: sa.Engine) -> Path:
    """The test's stocked SQLite file, no connection of the test's left open."""
    stocked(database)
    database.dispose()
    assert database.url.database
    return Path(database.url.database)


@pytest.fixture
def shop(redis_url: str, prefix: str, shop_file: Path) -> Iterator[str]:
    # From a URL, as the demo serves it: the shop's own engine, never creating the file.
    with serving(redis_url, prefix, f"sqlite:///{shop_file}", sql_wait=0.2) as url:
        yield url


def assert_unavailable(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert "cannot reach its database" in answer.text
    assert answer.headers["retry-after"] == "5"


@SQLITE
def test_a_locked_database_is_a_503_and_the_retry_orders(
    shop: str, shop_file: Path, database: sa.Engine
) -> None:
    with browser(shop) as client:
        post(client, "/item/20", "/cart", item="20", count="1")
        form = checkout_form(client)
        holder = sqlite3.connect(shop_file, isolation_level=None)  # another writer
        holder.execute("BEGIN IMMEDIATE")
        try:
            assert_unavailable(client.post("/checkout", data=form))
            assert client.get("/item/21").status_code == 200  # readers go on
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        order_of(client.post("/checkout", data=form))
    assert catalog.count_orders(database) == 1


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
def test_a_row_locked_past_the_wait_is_a_503_on_postgresql(
    redis_url: str, prefix: str, database: sa.Engine
) -> None:
    with (
        serving(redis_url, prefix, stocked(database), sql_wait=0.2) as shop,
        browser(shop) as client,
    ):
        post(client, "/item/20", "/cart", item="20", count="1")
        form = checkout_form(client)
        with database.begin() as holder:  # another transaction holds the row
            holder.execute(
                sa.select(shopdb.inventory)
                .where(shopdb.inventory.c.item_id == 20)
                .with_for_update()
            )
            assert_unavailable(client.post("/checkout", data=form))
        order_of(client.post("/checkout", data=form))
    assert catalog.count_orders(database) == 1


@SQLITE
def test_a_database_moved_away_or_broken_is_a_503_and_the_shop_recovers(
    shop: str, shop_file: Path, database: sa.Engine
) -> None:
    files = [shop_file.with_name(shop_file.name + end) for end in ("", "-wal", "-shm")]
    aside = {file: file.with_name(f"aside-{file.name}") for file in files if file.exists()}
    with browser(shop) as client:
        post(client, "/item/30", "/cart", item="30", count="1")
        form = checkout_form(client)
        for file, away in aside.items():
            file.rename(away)
        assert_unavailable(client.post("/checkout", data=form))
        assert_unavailable(client.get("/item/31"))  # a row read through
        assert not shop_file.exists()  # no empty database in its place
        shop_file.write_bytes(b"not a database" * 1000)
        assert_unavailable(client.get("/item/31"))
        assert_unavailable(client.post("/checkout", data=form))
        shop_file.unlink()
        for file, away in aside.items():
            away.rename(file)
        assert client.get("/item/31").status_code == 200
        order_of(client.post("/checkout", data=form))
    assert catalog.count_orders(database) == 1


def test_two_shops_making_one_database_at_once_make_its_inventory_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'data' / 'shop.db'}"
    items = 12_000  # a few batches each
    start = threading.Barrier(3)

    def make(_: int) -> None:
        start.wait()
        prepare_database(url, items, Console(quiet=True)).dispose()

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        list(pool.map(make, range(3)))  # raises what any of them raised
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            count = conn.scalar(sa.select(sa.func.count()).select_from(shopdb.inventory))
        assert count == items
        assert catalog.count_orders(engine) == 0
    finally:
        engine.dispose()


def test_a_database_folder_that_cannot_be_made_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")  # a file where the folder goes
    with pytest.raises(ConfigError, match="cannot make the database's folder"):
        prepare_database(f"sqlite:///{tmp_path / 'taken' / 'shop.db'}", 10, Console(quiet=True))
