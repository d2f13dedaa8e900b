"""The redis-py shim's public fallback: with redis-py's private shape missing
(``FAST`` False), every operation still runs, on the pool's own connections
and the connection's public ``read_response``."""

from __future__ import annotations

from typing import Any

import pytest
import redis

import webtier
from webtier import Config
from webtier._core import redispy
from webtier.errors import InvalidInput


@pytest.fixture
def public_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redispy, "FAST", False)


def test_the_shape_check_passes_on_the_pinned_redis_py() -> None:
    assert redispy.FAST, f"redis-py {redis.__version__} changed shape: the fast path is off"


def test_operations_run_on_the_public_api(
    public_only: None, redis_url: str, config: Config
) -> None:
    client = webtier.connect(redis_url)
    try:
        tier = webtier.WebTier(client, config)
        tier.counters.record("hits", 3, 1_700_000_000)
        assert tier.counters.get("hits", 1) == [(1_700_000_000, 3)]
        token = tier.sessions.new(user="alice")
        assert tier.sessions.touch(token, item="book")
        assert tier.sessions.recently_viewed(token) == ["book"]
        with pytest.raises(InvalidInput):
            tier.counters.record("hits", 1, "soon")  # type: ignore[arg-type]
        pool = getattr(client, "connection_pool", None)
        if pool is not None:  # standalone: nothing kept in front of the pool
            assert getattr(pool, redispy._IDLE_ATTR, None) is None
    finally:
        webtier.disconnect(client)


@pytest.mark.onlynoncluster  # one connection of one server is enough here
def test_error_replies_come_back_as_values(public_only: None, redis_url: str) -> None:
    pool = redis.ConnectionPool.from_url(redis_url)
    conn = pool.get_connection()
    try:
        conn.send_command("NO-SUCH-COMMAND")
        reply = redispy.reply_reader(conn)(disable_decoding=True, timeout=5)
        assert isinstance(reply, redis.exceptions.ResponseError)
        conn.send_command("PING")
        assert redispy.reply_reader(conn)(disable_decoding=True) == b"PONG"
    finally:
        pool.release(conn)
        pool.disconnect()


@pytest.mark.parametrize("parse", [redispy.parse_error, redispy._parse_error_public])
def test_error_replies_become_the_exceptions_the_wire_reads(parse: Any) -> None:
    # redis-py's parser (checked at import) and webtier's own table alike.
    moved = parse("MOVED 3999 127.0.0.1:6381")
    assert isinstance(moved, redis.exceptions.MovedError)
    assert (moved.host, int(moved.port)) == ("127.0.0.1", 6381)
    ask = parse("ASK 3999 127.0.0.1:6382")
    assert type(ask) is redis.exceptions.AskError
    assert (ask.host, int(ask.port)) == ("127.0.0.1", 6382)
    assert isinstance(parse("NOSCRIPT No matching script."), redis.exceptions.NoScriptError)
    assert isinstance(parse("WRONGPASS bad"), redis.exceptions.AuthenticationError)
    assert isinstance(parse("TRYAGAIN later"), redis.exceptions.TryAgainError)
    assert isinstance(parse("CLUSTERDOWN down"), redis.exceptions.ClusterDownError)
    assert isinstance(parse("LOADING loading"), redis.exceptions.BusyLoadingError)
    wrong = parse("WRONGTYPE Operation against a key holding the wrong kind of value")
    assert type(wrong) is redis.exceptions.ResponseError


def test_the_error_parser_is_redis_pys_on_the_pinned_redis_py() -> None:
    assert redispy.parse_error is not redispy._parse_error_public
