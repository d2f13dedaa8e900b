from __future__ import annotations

import pytest
import redis
import redis.cluster

from webtier.connect import DEFAULTS, connect, parse
from webtier.errors import ConfigError


def test_plain_url_goes_to_redis_py_with_web_tier_timeouts() -> None:
    target = parse("redis://localhost:6379/2")
    assert not target.cluster
    assert target.options == DEFAULTS


def test_timeouts_in_the_url_win() -> None:
    target = parse("redis://localhost/0?socket_timeout=9")
    assert "socket_timeout" not in target.options


def test_cluster_url_lists_seeds() -> None:
    target = parse("redis+cluster://user:pw@10.0.0.1:7000,10.0.0.2:7001?client_name=shop")
    assert target.cluster
    assert target.seeds == (("10.0.0.1", 7000), ("10.0.0.2", 7001))
    assert target.url == "redis://user:pw@10.0.0.1:7000/?client_name=shop"


def test_tls_cluster_url() -> None:
    assert parse("rediss+cluster://h:7000").url.startswith("rediss://h:7000")


@pytest.mark.parametrize(
    "url",
    [
        "localhost:6379",
        "http://x",
        "redis+cluster://h",
        "redis+cluster://h:7000/3",
        "redis+cluster://:7000",
    ],
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigError):
        parse(url)


def test_connect_builds_the_right_client_kind() -> None:
    # Clients connect lazily: no server is needed to build them.
    assert isinstance(connect("unix:///tmp/none.sock"), redis.Redis)
    assert isinstance(connect("redis://localhost:1/0"), redis.Redis)
