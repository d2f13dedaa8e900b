"""Public module paths that moved keep working, with a DeprecationWarning
naming the new home."""

from __future__ import annotations

import importlib

import pytest

MOVED = [
    ("webtier.pgserver", "PostgresServer", "webtier.testing.pgserver"),
    ("webtier.pgserver", "find_postgres_bin", "webtier.testing.pgserver"),
    ("webtier.shopdb", "inventory_source", "webtier.demo.shopdb"),
    ("webtier.shopdb", "inventory", "webtier.demo.shopdb"),
    ("webtier.rows_cli", "rows", "webtier.cli.rows"),
    ("webtier.cli", "stop_on_signals", "webtier.cli.signals"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED)
def test_a_moved_name_is_served_from_its_new_home(old: str, name: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"use {new}\.{name}"):
        found = getattr(importlib.import_module(old), name)
    assert found is getattr(importlib.import_module(new), name)


def test_edge_is_shared_options() -> None:
    from webtier.cli.shared import SharedOptions

    with pytest.warns(DeprecationWarning, match="SharedOptions"):
        from webtier.cli import Edge
    assert Edge is SharedOptions


def test_the_testing_helpers_keep_their_path() -> None:
    from webtier.testing import RedisCluster, RedisServer, free_port
    from webtier.testing.redis_servers import RedisServer as Server

    assert RedisServer is Server
    assert callable(free_port)
    assert RedisCluster.__module__ == "webtier.testing.redis_servers"
