from __future__ import annotations

import pytest
import redis
import redis.asyncio
import redis.cluster

from webtier._core.mux import MuxClient
from webtier.connect import DEFAULTS, connect, connect_async, parse
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


def test_sentinel_url_names_the_sentinels_the_service_and_the_database() -> None:
    target = parse("redis+sentinel://:pw@10.0.0.1:26379,[::1]:26380/shop/3?client_name=web")
    assert target.sentinel is not None
    assert target.sentinel.sentinels == (("10.0.0.1", 26379), ("::1", 26380))
    assert target.sentinel.service == "shop"
    assert target.sentinel.server_url == "redis://:pw@10.0.0.1:26379/3?client_name=web"
    assert (target.sentinel.username, target.sentinel.password) == (None, None)


def test_sentinel_credentials_are_apart_from_the_servers() -> None:
    url = "rediss+sentinel://u:pw@h:26379/shop?sentinel_username=s&sentinel_password=p%40ss"
    target = parse(url)
    assert target.sentinel is not None
    assert target.sentinel.server_url == "rediss://u:pw@h:26379/0"
    assert (target.sentinel.username, target.sentinel.password) == ("s", "p@ss")


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://h:26379",
        "redis+sentinel://h:26379/",
        "redis+sentinel://h/shop",
        "redis+sentinel://h:26379/shop/x",
        "redis+sentinel://h:26379/shop/0/1",
    ],
)
def test_bad_sentinel_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigError):
        parse(url)


def test_the_sentinel_clients() -> None:
    # Clients connect lazily: no sentinel is needed to build them.
    client = connect("redis+sentinel://localhost:1/shop/2")
    assert isinstance(client, redis.Redis)
    assert client.connection_pool.connection_kwargs["db"] == 2
    mux = connect_async("redis+sentinel://localhost:1/shop/2")
    assert isinstance(mux, MuxClient)
    assert mux.settings.db == 2
    # redis-py's asyncio Sentinel (its pool's connections find the master).
    redispy = connect_async("redis+sentinel://localhost:1/shop/2", client="redis-py")
    assert isinstance(redispy, redis.asyncio.Redis)
    assert redispy.connection_pool.connection_kwargs["db"] == 2
