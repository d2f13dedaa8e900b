"""The shop's health endpoints tell the truth: ``/healthz`` while the
process serves, ``/readyz`` 503 while Redis (killed with ``kill -9``) or the
database does not answer, 200 again once they do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers.servers import BINARIES, wait_until
from tests.helpers.shop import serving, stocked
from webtier.testing import RedisServer


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    with RedisServer.start(BINARIES["standalone"]) as running:
        yield running


def ready(client: httpx.Client) -> bool:
    return client.get("/readyz").status_code == 200


def test_readyz_follows_a_redis_killed_and_back(
    own_server: RedisServer, prefix: str, tmp_path: Path
) -> None:
    engine = stocked(sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}"))
    with serving(own_server.url, prefix, engine) as url, httpx.Client(base_url=url) as client:
        answer = client.get("/readyz")
        assert (answer.status_code, answer.text) == (200, "ready\nredis: ok\ndatabase: ok\n")
        own_server.kill()  # SIGKILL
        answer = client.get("/readyz", timeout=30)
        assert answer.status_code == 503
        assert answer.text.startswith("not ready\nredis: unreachable (")
        assert answer.text.endswith("database: ok\n")
        assert client.get("/healthz").text == "ok"  # the process still serves
        home = client.get("/")
        assert home.status_code == 503  # as every page needing Redis
        assert "Back shortly" in home.text  # the shop's page, not Starlette's 500
        assert home.headers["retry-after"] == "5"
        own_server.launch()
        assert wait_until(lambda: ready(client), 30), client.get("/readyz").text
    engine.dispose()


def test_readyz_says_when_the_database_is_gone(
    own_server: RedisServer, prefix: str, tmp_path: Path
) -> None:
    path = tmp_path / "shop.db"
    engine = stocked(sa.create_engine(f"sqlite:///{path}", poolclass=sa.NullPool))
    with serving(own_server.url, prefix, engine) as url, httpx.Client(base_url=url) as client:
        assert ready(client)
        path.rename(tmp_path / "away.db")
        answer = client.get("/readyz", timeout=30)
        assert answer.status_code == 503
        assert answer.text.startswith("not ready\nredis: ok\ndatabase: unreachable (")
        assert "no such table" in answer.text
        path.unlink()  # SQLite made an empty file in its place
        (tmp_path / "away.db").rename(path)
        assert ready(client)
    engine.dispose()
