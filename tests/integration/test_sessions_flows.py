"""The session flows as ordinary operations, run by a sync tier's own
transport on one server (the middlewares' tests cover every target and
both APIs; the load script's rules are checked here on every target). Each
flow is watched to see the round trips it makes; an outage is a tier whose
port refuses connections."""

from __future__ import annotations

import dataclasses
import secrets
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

import webtier
from tests.helpers.servers import all_keys
from webtier import sessions
from webtier._core.protocol import Op, Step
from webtier.config import RetryPolicy, SessionSettings
from webtier.errors import LateCookie, RedisUnavailable
from webtier.testing import RedisServer
from webtier.web.sessions import SessionOptions, flows
from webtier.web.sessions.cookie import Where, encode
from webtier.web.sessions.outage import outage_log
from webtier.web.sessions.state import SessionState

pytestmark = pytest.mark.needs_redis

KEY = b"k" * 32
OLD = b"o" * 32
HTTPS = Where(mount="", scheme="https", host="shop.example")


@pytest.fixture
def tier(servers: dict[str, RedisServer], config: webtier.Config) -> Iterator[webtier.WebTier]:
    client = webtier.connect(servers["standalone"].url)
    yield webtier.WebTier(client, config)
    webtier.disconnect(client)


@pytest.fixture
def down(config: webtier.Config) -> Iterator[webtier.WebTier]:
    """A tier whose Redis is away: its port is bound, never listening."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        client = webtier.connect(f"redis://127.0.0.1:{probe.getsockname()[1]}")
        yield webtier.WebTier(client, dataclasses.replace(config, retry=RetryPolicy(attempts=0)))
        webtier.disconnect(client)


def watched(op: Op[Any], steps: list[Step]) -> Op[Any]:
    """``op``, noting each step it sends (errors thrown in go through)."""
    try:
        step = next(op)
        while True:
            steps.append(step)  # type: ignore[arg-type]
            try:
                reply = yield step
            except Exception as error:
                step = op.throw(error)
            else:
                step = op.send(reply)
    except StopIteration as done:
        return done.value


def run(tier: webtier.WebTier, op: Op[Any]) -> tuple[Any, int]:
    """The flow's result, and how many round trips it took."""
    steps: list[Step] = []
    return tier.transport.run(watched(op, steps)), len(steps)


def state_of(
    tier: webtier.WebTier, token: str | None, cookie: str | None = None, **settings: Any
) -> SessionState:
    options = SessionOptions(**settings)
    if cookie is None and token is not None:
        cookie = f"webtier_session={encode(options, token)}"
    state = SessionState.from_cookie(options, outage_log(30), cookie)
    state.views = tier.ranking.views
    return state


def cookie_set(state: SessionState) -> str:
    return dict(state.response_headers(lambda: HTTPS)).get("set-cookie", "")


def test_an_anonymous_visitor_reads_without_any_call_and_gets_no_cookie(
    tier: webtier.WebTier,
) -> None:
    anonymous = state_of(tier, None)
    cfg = tier.config
    for flow in (flows.user, flows.data, flows.cart, flows.recently_viewed, flows.clear_cart):
        value, trips = run(tier, flow(cfg, anonymous))
        assert trips == 0
        assert not value
    assert anonymous.response_headers(lambda: HTTPS) == [("vary", "Cookie")]


def test_the_first_write_creates_the_session_and_sets_its_cookie(tier: webtier.WebTier) -> None:
    fresh = state_of(tier, None)
    assert run(tier, flows.set_cart(tier.config, fresh, "book", 2)) == (None, 2)  # new, set
    assert fresh.token is not None
    assert tier.carts.get(fresh.token) == {"book": 2}
    headers = dict(fresh.response_headers(lambda: HTTPS))
    assert headers["set-cookie"].startswith(f"webtier_session={fresh.token};")
    assert headers["cache-control"] == "no-store"


def test_a_live_session_is_read_once_and_touched_only_when_idle_long_enough(
    tier: webtier.WebTier,
) -> None:
    token = tier.sessions.new(user="ann")
    live = state_of(tier, token)
    assert run(tier, flows.user(tier.config, live)) == ("ann", 1)
    assert run(tier, flows.user(tier.config, live)) == ("ann", 0)  # read once per request
    seen = tier.sessions.info(token)
    assert seen is not None
    fresh = state_of(tier, token)
    assert run(tier, flows.user(tier.config, fresh)) == ("ann", 1)
    assert tier.sessions.info(token) == seen  # seen less than refresh_after ago: not touched
    idle = state_of(tier, token)
    idle.refresh_after = 0.0
    assert run(tier, flows.user(tier.config, idle)) == ("ann", 1)  # checked and touched at once
    touched = tier.sessions.info(token)
    assert touched is not None
    assert touched.last_seen > seen.last_seen
    assert idle.response_headers(lambda: HTTPS) == [("vary", "Cookie")]  # same cookie


def test_every_read_of_a_request_answers_from_the_one_load_and_sees_its_writes(
    tier: webtier.WebTier,
) -> None:
    token = tier.sessions.new(user="ann")
    tier.sessions.update(token, {"theme": "dark", "n": [1, 2]})
    tier.carts.set(token, "book", 2)
    tier.sessions.touch(token, item="pen")
    cfg = tier.config
    live = state_of(tier, token)
    assert run(tier, flows.user(cfg, live)) == ("ann", 1)
    assert run(tier, flows.data(cfg, live)) == ({"theme": "dark", "n": [1, 2]}, 0)
    assert run(tier, flows.get(cfg, live, "theme")) == ("dark", 0)
    assert run(tier, flows.cart(cfg, live)) == ({"book": 2}, 0)
    assert run(tier, flows.recently_viewed(cfg, live)) == (["pen"], 0)
    # Each write is one round trip, and the request's later reads see it.
    writes = [
        flows.update(cfg, live, {"theme": "light", "t": (1, 2)}),
        flows.discard(cfg, live, "n"),
        flows.set_cart(cfg, live, "cup", 1),
        flows.set_cart(cfg, live, "book", 0),
        flows.record_view(cfg, live, "cup"),
    ]
    assert [run(tier, write)[1] for write in writes] == [1, 1, 1, 1, 1]
    expected = ({"theme": "light", "t": [1, 2]}, {"cup": 1}, ["cup", "pen"])
    read = [flows.data(cfg, live), flows.cart(cfg, live), flows.recently_viewed(cfg, live)]
    assert tuple(run(tier, flow) for flow in read) == tuple((value, 0) for value in expected)
    # ... as Redis has it: the next request reads the same.
    again = state_of(tier, token)
    read = [flows.data(cfg, again), flows.cart(cfg, again), flows.recently_viewed(cfg, again)]
    assert tuple(run(tier, flow)[0] for flow in read) == expected
    run(tier, flows.clear_cart(cfg, live))
    assert run(tier, flows.cart(cfg, live)) == ({}, 0)
    assert tier.carts.get(token) == {}


@pytest.mark.parametrize("refresh_after", [60.0, 0.0], ids=["plain-load", "every-load-touches"])
def test_a_pop_as_the_first_read_takes_the_value_in_the_loads_round_trip(
    tier: webtier.WebTier, refresh_after: float
) -> None:
    token = tier.sessions.new(user="ann")
    tier.sessions.update(token, {"notice": ["saved"], "theme": "dark"})
    cfg = tier.config
    live = state_of(tier, token)
    live.refresh_after = refresh_after
    assert run(tier, flows.pop(cfg, live, "notice")) == (["saved"], 1)
    # The request's later reads: from the load, without the value taken.
    assert run(tier, flows.data(cfg, live)) == ({"theme": "dark"}, 0)
    assert run(tier, flows.user(cfg, live)) == ("ann", 0)
    assert run(tier, flows.pop(cfg, live, "notice", "none")) == ("none", 0)
    # ... and the next request: gone from Redis.
    assert tier.sessions.data(token) == {"theme": "dark"}
    again = state_of(tier, token)
    assert run(tier, flows.pop(cfg, again, "notice", ())) == ((), 1)


def test_a_pop_after_the_load_writes_only_when_the_value_is_there(tier: webtier.WebTier) -> None:
    token = tier.sessions.new()
    tier.sessions.update(token, {"notice": "hello", "theme": "dark"})
    cfg = tier.config
    live = state_of(tier, token)
    assert run(tier, flows.get(cfg, live, "theme")) == ("dark", 1)
    assert run(tier, flows.pop(cfg, live, "missing", 0)) == (0, 0)
    assert run(tier, flows.pop(cfg, live, "notice")) == ("hello", 1)
    assert tier.sessions.data(token) == {"theme": "dark"}
    # A copy read with the page is still in Redis: the value is removed by a write.
    seeded = state_of(tier, token)
    seeded.read_with_page = tier.transport.run(sessions.ops.load(cfg, token, 60.0))
    assert run(tier, flows.pop(cfg, seeded, "theme")) == ("dark", 1)
    assert tier.sessions.data(token) == {}


def test_a_pop_without_a_session_calls_nothing(tier: webtier.WebTier) -> None:
    anonymous = state_of(tier, None)
    assert run(tier, flows.pop(tier.config, anonymous, "notice", [])) == ([], 0)
    assert anonymous.token is None


def test_a_login_hands_the_request_its_new_session_with_the_merged_cart(
    tier: webtier.WebTier,
) -> None:
    # The move's reply holds the new session's hash: the request reads its
    # merged cart, data and viewed items with no round trip after the login.
    earlier = tier.sessions.new(user="bob")
    tier.carts.set(earlier, "pen", 1)
    token = tier.sessions.new()
    tier.carts.set(token, "book", 1)
    tier.sessions.update(token, {"theme": "dark"})
    tier.sessions.touch(token, item="cup")
    cfg = tier.config
    live = state_of(tier, token)
    assert run(tier, flows.cart(cfg, live)) == ({"book": 1}, 1)
    run(tier, flows.login(cfg, live, "bob"))
    assert run(tier, flows.cart(cfg, live)) == ({"book": 1, "pen": 1}, 0)  # merged in Redis
    assert run(tier, flows.data(cfg, live)) == ({"theme": "dark"}, 0)
    assert run(tier, flows.recently_viewed(cfg, live)) == (["cup"], 0)
    assert run(tier, flows.user(cfg, live)) == ("bob", 0)
    # ... as the next request reads it.
    again = state_of(tier, live.token)
    read = [flows.cart(cfg, again), flows.data(cfg, again), flows.recently_viewed(cfg, again)]
    assert [run(tier, flow)[0] for flow in read] == [
        {"book": 1, "pen": 1},
        {"theme": "dark"},
        ["cup"],
    ]
    assert run(tier, flows.user(cfg, again)) == ("bob", 0)


def test_a_dead_sessions_cookie_is_left_alone(tier: webtier.WebTier) -> None:
    # It may be the one a concurrent login just rotated: deleting it could
    # delete the new one.
    dead = state_of(tier, webtier.sessions.new_token())
    assert run(tier, flows.data(tier.config, dead)) == ({}, 1)
    assert dead.response_headers(lambda: HTTPS) == [("vary", "Cookie")]


def test_a_cookie_signed_with_an_old_key_is_signed_again(tier: webtier.WebTier) -> None:
    token = tier.sessions.new()
    old_value = encode(SessionOptions(signing_keys=[OLD]), token)
    rotated = state_of(tier, token, f"webtier_session={old_value}", signing_keys=[KEY, OLD])
    run(tier, flows.user(tier.config, rotated))
    signed = encode(SessionOptions(signing_keys=[KEY]), token)
    assert cookie_set(rotated).startswith(f"webtier_session={signed};")


def test_login_rotates_the_token_and_logout_clears_the_cookie(tier: webtier.WebTier) -> None:
    token = tier.sessions.new()
    tier.carts.set(token, "book", 1)
    live = state_of(tier, token)
    result, _ = run(tier, flows.login(tier.config, live, "bob"))
    assert result is not None
    assert result.token == live.token != token
    assert tier.sessions.info(token) is None  # the old token is dead at once
    assert tier.carts.get(result.token) == {"book": 1}
    assert run(tier, flows.user(tier.config, live)) == ("bob", 0)
    run(tier, flows.logout(tier.config, live))
    assert tier.sessions.info(result.token) is None
    assert run(tier, flows.user(tier.config, live)) == (None, 0)
    assert cookie_set(live).startswith("webtier_session=;")


def test_login_without_a_session_makes_one_for_the_user(tier: webtier.WebTier) -> None:
    fresh = state_of(tier, None)
    assert run(tier, flows.login(tier.config, fresh, "ann")) == (None, 1)
    assert fresh.token is not None
    assert tier.sessions.check(fresh.token) == "ann"


def test_the_cookie_cannot_change_once_the_headers_went_out(tier: webtier.WebTier) -> None:
    late = state_of(tier, None)
    late.response_headers(lambda: HTTPS)
    with pytest.raises(LateCookie):
        run(tier, flows.login(tier.config, late, "ann"))
    with pytest.raises(LateCookie):
        run(tier, flows.update(tier.config, late, {"a": 1}))


def test_an_outage_fails_closed_by_default(tier: webtier.WebTier, down: webtier.WebTier) -> None:
    token = tier.sessions.new(user="ann")
    live = state_of(tier, token)
    with pytest.raises(RedisUnavailable):
        run(down, flows.user(down.config, live))
    # Not remembered as anonymous: the next read tries again.
    assert run(tier, flows.user(tier.config, live)) == ("ann", 1)


def test_an_outage_serves_an_anonymous_visitor_when_asked(
    tier: webtier.WebTier, down: webtier.WebTier
) -> None:
    live = state_of(tier, tier.sessions.new(user="ann"), on_outage="anonymous")
    cfg = down.config
    # The op catches the RedisUnavailable the transport throws in at its yield.
    assert run(down, flows.user(cfg, live)) == (None, 1)
    assert run(down, flows.cart(cfg, live)) == ({}, 0)
    assert run(down, flows.record_view(cfg, live, "book")) == (None, 0)  # dropped, not failed
    with pytest.raises(RedisUnavailable):
        run(down, flows.update(cfg, live, {"a": 1}))
    with pytest.raises(RedisUnavailable):
        run(down, flows.login(cfg, live, "ann"))
    # The cookie stays: the session is still there once Redis is back.
    assert live.response_headers(lambda: HTTPS) == [("vary", "Cookie")]


def test_a_forged_cookie_is_cleared_without_any_call(tier: webtier.WebTier) -> None:
    token = secrets.token_urlsafe(32)
    forged = state_of(tier, token, f"webtier_session={token}.{'A' * 43}", signing_keys=[KEY])
    assert run(tier, flows.user(tier.config, forged)) == (None, 0)
    assert cookie_set(forged).startswith("webtier_session=;")


def test_a_write_to_a_session_that_ended_meanwhile_goes_to_a_new_one(
    tier: webtier.WebTier,
) -> None:
    token = tier.sessions.new()
    live = state_of(tier, token)
    run(tier, flows.user(tier.config, live))
    tier.sessions.logout(token)  # elsewhere, between two calls of the handler
    assert run(tier, flows.update(tier.config, live, {"a": 1})) == (None, 3)  # update, new, update
    assert live.token not in (None, token)
    assert tier.sessions.data(live.token) == {"a": 1}
    assert cookie_set(live).startswith(f"webtier_session={live.token};")


def test_a_view_or_login_on_a_session_that_ended_meanwhile_starts_anew(
    tier: webtier.WebTier,
) -> None:
    token = tier.sessions.new()
    viewed = state_of(tier, token)
    run(tier, flows.user(tier.config, viewed))
    tier.sessions.logout(token)
    run(tier, flows.record_view(tier.config, viewed, "book"))  # touch, new, touch
    assert viewed.token not in (None, token)
    assert tier.sessions.recently_viewed(viewed.token) == ["book"]
    gone = tier.sessions.new()
    login = state_of(tier, gone)
    run(tier, flows.user(tier.config, login))
    tier.sessions.logout(gone)
    assert run(tier, flows.login(tier.config, login, "ann"))[0] is None
    assert run(tier, flows.user(tier.config, login)) == ("ann", 0)
    assert login.token is not None
    assert tier.sessions.check(login.token) == "ann"


# -- the load script keeps the touch's rules, on every target ---------------------------------


def load(tier: webtier.WebTier, token: str, refresh_after: float = 0.0) -> Any:
    return tier.transport.run(sessions.ops.load(tier.config, token, refresh_after))


def server_ms(client: Any) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


@pytest.mark.matrix
def test_a_load_touches_as_a_touch_does(sync_client: Any, config: webtier.Config) -> None:
    settings = SessionSettings(idle_timeout=60, absolute_timeout=3600)
    tier = webtier.WebTier(sync_client, dataclasses.replace(config, sessions=settings))
    token = tier.sessions.new(user="ann")
    where = sessions.layout.place(tier.config, token)
    other = tier.sessions.new()  # scored after ann's: the top of the shard, or of another
    top = max(float(score) for _, score in sync_client.zrange(where.recent, 0, -1, withscores=True))
    expires = int(sync_client.hget(where.key, "e"))
    time.sleep(0.02)
    fields = load(tier, token, refresh_after=60)  # seen just now: read, not touched
    assert fields is not None
    assert fields["u"] == b"ann"
    assert int(sync_client.hget(where.key, "e")) == expires
    fields = load(tier, token)  # due: touched in the same script
    assert fields is not None
    # Above every score its shard held: a cleaner that read one of them spares it.
    assert float(sync_client.zscore(where.recent, token)) > top
    assert int(sync_client.hget(where.key, "e")) > expires  # the idle timeout restarted
    assert 59_000 < sync_client.pttl(where.key) <= 60_000
    assert tier.sessions.check(other) is None  # the other session untouched


@pytest.mark.matrix
def test_a_load_never_revives_or_creates_a_session(
    sync_client: Any, config: webtier.Config, redis_url: str, prefix: str
) -> None:
    settings = SessionSettings(strict=False, absolute_timeout=30)
    tier = webtier.WebTier(sync_client, dataclasses.replace(config, sessions=settings))
    assert load(tier, webtier.sessions.new_token()) is None
    assert all_keys(redis_url, f"{prefix}:*") == []
    # Removed by the cleaner: it stays dead, and its index entry goes.
    cleaned = tier.sessions.new()
    tier.sessions.clean(keep=0)
    assert load(tier, cleaned) is None
    assert all_keys(redis_url, f"{prefix}:*:t:*") == []
    # Past its absolute timeout, its key not yet expired: deleted.
    old = tier.sessions.new()
    where = sessions.layout.place(tier.config, old)
    sync_client.hset(where.key, "c", server_ms(sync_client) - 31_000)
    assert load(tier, old) is None
    assert sync_client.exists(where.key) == 0
    assert sync_client.zscore(where.recent, old) is None


@pytest.mark.matrix
def test_a_load_runs_its_script_a_round_trip_later_only_when_it_has_work(
    sync_client: Any, config: webtier.Config
) -> None:
    settings = SessionSettings(strict=False, absolute_timeout=30)
    tier = webtier.WebTier(sync_client, dataclasses.replace(config, sessions=settings))
    token = tier.sessions.new()
    where = sessions.layout.place(tier.config, token)

    def load_60() -> tuple[bool, int]:
        """Whether the session was read live, and in how many round trips."""
        fields, trips = run(tier, sessions.ops.load(tier.config, token, 60))
        return fields is not None, trips

    assert load_60() == (True, 1)  # seen just now: the plain reads alone
    sync_client.zrem(where.recent, token)  # missing from its index: listed again
    assert load_60() == (True, 2)
    assert sync_client.zscore(where.recent, token) is not None
    long_ago = (server_ms(sync_client) - 120_000) * 1000
    sync_client.zadd(where.recent, {token: long_ago})  # seen long ago: touched
    assert load_60() == (True, 2)
    assert float(sync_client.zscore(where.recent, token)) > long_ago
    # Past its absolute timeout, its key not yet expired: deleted.
    sync_client.hset(where.key, "c", server_ms(sync_client) - 31_000)
    assert load_60() == (False, 2)
    assert sync_client.exists(where.key) == 0
    assert sync_client.zscore(where.recent, token) is None
    sync_client.zadd(where.recent, {token: long_ago})  # gone, its entry left: forgotten
    assert load_60() == (False, 2)
    assert sync_client.zscore(where.recent, token) is None
    assert load_60() == (False, 1)  # gone and unlisted: nothing to do
