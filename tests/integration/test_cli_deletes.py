"""Every command that deletes data says what it will delete and asks:
no answer deletes nothing, ``--dry-run`` only counts, ``--yes`` deletes.

Each case makes data, then runs its command three ways and checks what is
left after each: the same data after no answer and after ``--dry-run``,
less of it after ``--yes``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa
from click.testing import CliRunner

import webtier
from webtier.cli import main
from webtier.demo import shopdb


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    said: str  # what it says it will delete
    left: Callable[[], object]  # what is left of the data


def invoke(*args: str, given: str | None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), input=given)
    return result.exit_code, result.output


@pytest.fixture
def tier(redis_url: str, prefix: str) -> Iterator[webtier.WebTier]:
    client = webtier.connect(redis_url)
    yield webtier.WebTier(client, webtier.Config(prefix=prefix))
    webtier.disconnect(client)


def sessions_clean(tier: webtier.WebTier, edge: tuple[str, ...], _: Path) -> Case:
    tokens = [tier.sessions.new(user="ann" if n % 2 else None) for n in range(5)]
    return Case(
        (*edge, "sessions", "clean", "--keep", "2"),
        "the 3 least recently seen of 5 sessions, logged-in users' included "
        "(keeping the 2 most recently seen)",
        lambda: sum(tier.sessions.info(token) is not None for token in tokens),
    )


def sessions_revoke(tier: webtier.WebTier, edge: tuple[str, ...], _: Path) -> Case:
    token = tier.sessions.new(user="ann")
    info = tier.sessions.info(token)
    assert info is not None
    return Case(
        (*edge, "sessions", "revoke", token),
        f"session {info.id} of user 'ann', with its data, viewed items and cart",
        lambda: tier.sessions.info(token) is not None,
    )


def sessions_revoke_all(tier: webtier.WebTier, edge: tuple[str, ...], _: Path) -> Case:
    for _n in range(3):
        tier.sessions.new(user="ann")
    return Case(
        (*edge, "sessions", "user", "ann", "--revoke-all"),
        "the 3 live sessions of user 'ann', their carts included",
        lambda: len(tier.sessions.of_user("ann")),
    )


def settings_reset(tier: webtier.WebTier, edge: tuple[str, ...], _: Path) -> Case:
    tier.deployment.check()  # the first writer stores its settings
    return Case(
        (*edge, "settings", "reset"),
        f"the stored settings of prefix {tier.config.keys.prefix!r}",
        lambda: tier.deployment.stored() is not None,
    )


def rows_init_reset(_: webtier.WebTier, edge: tuple[str, ...], tmp_path: Path) -> Case:
    url = f"sqlite:///{tmp_path}/shop.db"
    engine = sa.create_engine(url)
    shopdb.create(engine, 7)
    engine.dispose()

    def items() -> int:
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                return len(list(conn.scalars(sa.select(shopdb.inventory.c.item_id))))
        finally:
            engine.dispose()

    return Case(
        (*edge, "--database", url, "rows", "init", "--items", "3", "--reset"),
        "the shop's tables inventory (7 rows), ",  # then its order tables, each counted
        items,
    )


CASES = [sessions_clean, sessions_revoke, sessions_revoke_all, settings_reset, rows_init_reset]


@pytest.mark.parametrize("make", CASES, ids=lambda make: make.__name__)
def test_a_deleting_command_asks_counts_and_deletes_only_when_told(
    make: Callable[..., Case], tier: webtier.WebTier, redis_url: str, tmp_path: Path
) -> None:
    edge = ("--url", redis_url, "--prefix", tier.config.keys.prefix)
    case = make(tier, edge, tmp_path)
    before = case.left()

    for given in ("", "n\n"):  # no answer (end of input), or no
        code, shown = invoke(*case.args, given=given)
        assert code == 1, shown
        assert f"Delete {case.said}" in shown
        assert "not confirmed: nothing was changed" in shown
        assert case.left() == before

    code, shown = invoke(*case.args, "--dry-run", given=None)
    assert code == 0, shown
    assert shown.startswith(f"would delete {case.said}")
    assert shown.rstrip().endswith("nothing deleted (--dry-run)")
    assert case.left() == before

    code, shown = invoke(*case.args, "--yes", given=None)
    assert code == 0, shown
    assert "Delete" not in shown
    assert case.left() != before


def test_webtier_reset_counts_asks_and_empties_the_embedded_server(tmp_path: Path) -> None:
    from webtier.embedded import EmbeddedRedis

    with EmbeddedRedis(tmp_path, port=0) as user:
        client: Any = redis.Redis.from_url(user.url)
        try:
            client.mset({"a": 1, "b": 2})
            said = f"all 2 keys of the embedded redis-server in {tmp_path}, of every prefix"
            for given in ("", "n\n"):
                code, shown = invoke("--data-dir", str(tmp_path), "reset", given=given)
                assert code == 1, shown
                assert f"Delete {said}?" in shown
                assert client.dbsize() == 2
            code, shown = invoke("--data-dir", str(tmp_path), "reset", "--dry-run", given=None)
            assert (code, shown) == (0, f"would delete {said}; nothing deleted (--dry-run)\n")
            assert client.dbsize() == 2
            code, shown = invoke("--data-dir", str(tmp_path), "reset", "--yes", given=None)
            assert (code, shown) == (0, f"deleted 2 keys in {tmp_path}\n")
            assert client.dbsize() == 0
        finally:
            client.close()


def test_sessions_clean_limit_is_now_keep(redis_url: str, prefix: str) -> None:
    code, shown = invoke(
        "--url", redis_url, "--prefix", prefix, "sessions", "clean", "--limit", "3", given=None
    )
    assert code == 2
    assert "No such option '--limit'" in shown


def test_webtier_reset_of_a_data_dir_never_made_starts_no_server(tmp_path: Path) -> None:
    never = tmp_path / "never"
    code, shown = invoke("--data-dir", str(never), "reset", given=None)
    assert (code, shown) == (0, f"nothing to delete: no embedded redis-server data in {never}\n")
    assert not never.exists()
