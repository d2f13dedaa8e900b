"""Sessions and carts on real Redis: every target, both APIs."""

from __future__ import annotations

import dataclasses
import functools
import random
import uuid
from typing import Any

import anyio
import pytest
import redis
import redis.cluster

import webtier
from tests.helpers.ops import sampled_pick
from tests.helpers.servers import all_keys
from webtier import sessions
from webtier.config import SessionSettings
from webtier.errors import (
    BadToken,
    CartLimit,
    DataTooLarge,
    InvalidInput,
    UnknownSession,
    UserMismatch,
)
from webtier.sessions.tokens import is_token
from webtier.types import CartChange

pytestmark = pytest.mark.anyio


def _with(config: webtier.Config, **settings: Any) -> webtier.Config:
    return dataclasses.replace(config, sessions=SessionSettings(**settings))


@pytest.mark.matrix
async def test_a_new_session_is_checked_and_touched(tier: Any) -> None:
    token = await tier.sessions.new()
    assert is_token(token)
    assert await tier.sessions.check(token) is None
    first = await tier.sessions.info(token)
    assert first is not None
    assert first.user is None
    assert first.id != token
    assert await tier.sessions.touch(token, item="42")
    assert await tier.sessions.touch(token, user="alice", item="7")
    assert await tier.sessions.check(token) == "alice"
    second = await tier.sessions.info(token)
    assert second.last_seen > first.last_seen
    assert second.created == first.created
    assert second.id == first.id
    assert await tier.sessions.recently_viewed(token) == ["7", "42"]


@pytest.mark.matrix
async def test_touch_counts_the_view_in_the_ranking(tier: Any) -> None:
    token = await tier.sessions.new()
    for item in ("a", "b", "a"):
        await tier.sessions.touch(token, item=item)
    assert await tier.ranking.top(2) == [("a", 2.0), ("b", 1.0)]


@pytest.mark.matrix
async def test_a_view_is_counted_only_for_a_live_session(tier: Any) -> None:
    never_issued = "Q" * 43
    assert not await tier.sessions.touch(never_issued, item="ghost")
    token = await tier.sessions.new()
    await tier.sessions.logout(token)
    assert not await tier.sessions.touch(token, item="ghost")
    assert await tier.ranking.rank("ghost") is None
    live = await tier.sessions.new()
    assert await tier.sessions.touch(live, item="ghost")
    assert await tier.ranking.top(1) == [("ghost", 1.0)]


@pytest.mark.matrix
async def test_a_view_recorded_after_the_session_ended_counts_once(tier: Any) -> None:
    # A handler reads the user, a logout elsewhere ends the session, then the
    # handler records a view: it goes to a new session, counted once.
    from webtier.web.sessions import SessionOptions, flows
    from webtier.web.sessions.outage import outage_log
    from webtier.web.sessions.state import SessionState

    token = await tier.sessions.new()
    state = SessionState(SessionOptions(), outage_log(30), token, views=tier.ranking.views)
    # The flows are ordinary operations: the tier's own transport runs them.
    run = tier.transport.run
    if not isinstance(tier, webtier.AsyncWebTier):
        run = functools.partial(anyio.to_thread.run_sync, run)
    assert await run(flows.user(tier.config, state)) is None
    await tier.sessions.logout(token)
    await run(flows.record_view(tier.config, state, "42"))
    assert state.token not in (None, token)
    assert await tier.ranking.top(5) == [("42", 1.0)]
    assert await tier.sessions.recently_viewed(state.token) == ["42"]


@pytest.mark.matrix
async def test_a_page_visit_reads_its_own_view_after_a_script_flush(
    tier: Any, redis_url: str
) -> None:
    # The view's script and the read of the hash go in one pipeline; a server
    # that lost its scripts (a restart, a failover, SCRIPT FLUSH) answers the
    # script NOSCRIPT, and the read ran before it: it goes again after it.
    token = await tier.sessions.new()
    run = tier.transport.run
    if not isinstance(tier, webtier.AsyncWebTier):
        run = functools.partial(anyio.to_thread.run_sync, run)
    client = webtier.connect(redis_url)
    try:
        for item in ("1", "2"):
            if isinstance(client, redis.cluster.RedisCluster):
                nodes = redis.cluster.RedisCluster.ALL_NODES
                client.execute_command("SCRIPT FLUSH", target_nodes=nodes)
            else:
                client.script_flush()
            fields = await run(sessions.ops.visit(tier.config, token, 60, item))
            assert sessions.ops.viewed_of(tier.config, fields)[0] == item
    finally:
        webtier.disconnect(client)


@pytest.mark.matrix
async def test_the_recency_index_forgets_expired_sessions_with_no_cleaner(
    tier_factory: Any, config: webtier.Config, redis_url: str
) -> None:
    config = _with(config, idle_timeout=1, shards=1)
    tier = tier_factory(config)
    for _ in range(40):
        await tier.sessions.new()
    await anyio.sleep(1.2)  # all expired by Redis; their index entries stay
    live = [await tier.sessions.new() for _ in range(6)]
    client = webtier.connect(redis_url)
    try:
        recent = sessions.layout.Place(config, live[0]).recent
        assert client.zcard(recent) == 6  # each new session dropped up to 8
    finally:
        webtier.disconnect(client)


@pytest.mark.matrix
async def test_strict_touch_never_creates_a_session(tier: Any) -> None:
    token = webtier.sessions.new_token()
    assert not await tier.sessions.touch(token, user="mallory", item="1")
    assert await tier.sessions.info(token) is None
    assert await tier.sessions.check(token) is None


async def test_viewed_items_keep_the_newest_without_repeats(tier_factory: Any, config: Any) -> None:
    tier = tier_factory(_with(config, viewed=3))
    token = await tier.sessions.new()
    for item in ("1", "2", "3", "1", "4", "5"):
        await tier.sessions.touch(token, item=item)
    assert await tier.sessions.recently_viewed(token) == ["5", "4", "1"]


@pytest.mark.matrix
async def test_viewed_items_match_a_reference_lru(
    tier_factory: Any, config: Any, sync_client: Any
) -> None:
    """Views drawn from a small pool (so re-views of held, trimmed and
    long-gone items all happen), checked after every view against a plain
    least-recently-viewed list; the session never holds more than ``viewed``
    plus the script's slack, and its held count ``m`` stays exact."""
    keep = 5
    tier = tier_factory(_with(config, viewed=keep))
    token = await tier.sessions.new()
    key = sessions.layout.place(tier.config, token).key
    rng = random.Random(7)
    model: list[str] = []
    for _ in range(300):
        item = str(rng.randrange(12))
        await tier.sessions.touch(token, item=item)
        model = [item, *[i for i in model if i != item]][:keep]
        assert await tier.sessions.recently_viewed(token) == model
        fields = sync_client.hgetall(key)
        held = [f for f in fields if f.startswith(b"v")]
        assert len(held) <= keep + sessions.layout.VIEWED_SLACK
        assert int(fields[b"m"]) == len(held)

    # Lowered since: the next new view trims the session to the new figure.
    lower = tier_factory(_with(config, viewed=2))
    await lower.sessions.touch(token, item="new")
    assert await lower.sessions.recently_viewed(token) == ["new", model[0]]
    fields = sync_client.hgetall(key)
    assert len([f for f in fields if f.startswith(b"v")]) == 2 == int(fields[b"m"])


async def test_a_touch_by_another_user_is_refused(tier: Any) -> None:
    token = await tier.sessions.new(user="alice")
    with pytest.raises(UserMismatch):
        await tier.sessions.touch(token, user="bob")
    assert await tier.sessions.check(token) == "alice"


async def test_bad_tokens_are_refused_before_any_key(
    tier: Any, redis_url: str, prefix: str
) -> None:
    for bad in (
        "",
        "short",
        "x" * 42,
        "a" * 42 + "!",
        "{" + "a" * 42,
        42,
        None,
        str(uuid.uuid4()),
    ):
        with pytest.raises(BadToken):
            await tier.sessions.check(bad)
        with pytest.raises(BadToken):
            await tier.sessions.touch(bad)
        with pytest.raises(BadToken):
            await tier.carts.set(bad, "1", 1)
    assert all_keys(redis_url, f"{prefix}:*") == []


@pytest.mark.matrix
async def test_login_rotates_the_token_and_carries_everything(tier: Any) -> None:
    token = await tier.sessions.new()
    await tier.sessions.touch(token, item="9")
    await tier.sessions.update(token, {"theme": "dark", "n": [1, 2]})
    await tier.carts.set(token, "shoe", 2)
    before = await tier.sessions.info(token)
    result = await tier.sessions.login(token, "alice")
    assert result.token != token
    assert is_token(result.token)
    assert result.cart_changes == (CartChange("shoe", 0, 2),)
    assert await tier.sessions.info(token) is None
    assert await tier.sessions.check(token) is None
    assert not await tier.sessions.touch(token)
    assert await tier.sessions.check(result.token) == "alice"
    assert await tier.sessions.data(result.token) == {"theme": "dark", "n": [1, 2]}
    assert await tier.carts.get(result.token) == {"shoe": 2}
    assert await tier.sessions.recently_viewed(result.token) == ["9"]
    after = await tier.sessions.info(result.token)
    assert after.id == before.id
    assert after.last_seen > before.last_seen


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("add", {"hat": 3, "shoe": 1, "sock": 4}),
        ("replace", {"hat": 2, "sock": 4}),
        ("keep_larger", {"hat": 2, "shoe": 1, "sock": 4}),
    ],
)
@pytest.mark.matrix
async def test_login_merges_the_anonymous_cart(
    tier: Any, policy: str, expected: dict[str, int]
) -> None:
    mine = await tier.sessions.new(user="alice")
    await tier.carts.set(mine, "hat", 1)
    await tier.carts.set(mine, "shoe", 1)
    anonymous = await tier.sessions.new()
    await tier.carts.set(anonymous, "hat", 2)
    await tier.carts.set(anonymous, "sock", 4)
    result = await tier.sessions.login(anonymous, "alice", cart_policy=policy)
    assert await tier.carts.get(result.token) == expected
    old = {"hat": 1, "shoe": 1}
    changed = {c.item: (c.before, c.after) for c in result.cart_changes}
    assert changed == {
        item: (old.get(item, 0), expected.get(item, 0))
        for item in {*old, *expected}
        if old.get(item, 0) != expected.get(item, 0)
    }


async def test_login_of_an_unknown_session_fails(tier: Any) -> None:
    with pytest.raises(UnknownSession):
        await tier.sessions.login(webtier.sessions.new_token(), "alice")
    token = await tier.sessions.new()
    with pytest.raises(InvalidInput):
        await tier.sessions.login(token, "alice", cart_policy="merge")


@pytest.mark.matrix
async def test_users_list_and_revoke_their_sessions(tier: Any) -> None:
    phone = (await tier.sessions.login(await tier.sessions.new(), "alice")).token
    laptop = await tier.sessions.new(user="alice")
    other = await tier.sessions.new(user="bob")
    await tier.sessions.touch(laptop)
    listed = await tier.sessions.of_user("alice")
    assert [s.user for s in listed] == ["alice", "alice"]
    assert listed[0].id == (await tier.sessions.info(laptop)).id
    assert not await tier.sessions.revoke("alice", "no-such-id")
    assert not await tier.sessions.revoke("bob", listed[0].id)
    assert await tier.sessions.revoke("alice", listed[0].id)
    assert await tier.sessions.check(laptop) is None
    assert await tier.sessions.check(phone) == "alice"
    assert await tier.sessions.revoke_all("alice") == 1
    assert await tier.sessions.check(phone) is None
    assert await tier.sessions.of_user("alice") == []
    assert await tier.sessions.check(other) == "bob"


@pytest.mark.matrix
async def test_logout_ends_the_session(tier: Any, redis_url: str, prefix: str) -> None:
    token = await tier.sessions.new(user="carol")
    await tier.carts.set(token, "1", 1)
    await tier.sessions.logout(token)
    await tier.sessions.logout(token)
    assert await tier.sessions.info(token) is None
    assert await tier.carts.get(token) == {}
    assert await tier.sessions.of_user("carol") == []
    assert all_keys(redis_url, f"{prefix}:*:t:*") == []


async def test_data_is_updated_field_by_field(tier: Any) -> None:
    token = await tier.sessions.new()
    await tier.sessions.update(token, {"a": 1})
    await tier.sessions.update(token, {"b": {"x": "é"}})
    await tier.sessions.update(token, {})
    assert await tier.sessions.data(token) == {"a": 1, "b": {"x": "é"}}
    await tier.sessions.discard(token, "a", "missing")
    assert await tier.sessions.data(token) == {"b": {"x": "é"}}
    with pytest.raises(UnknownSession):
        await tier.sessions.update(webtier.sessions.new_token(), {"a": 1})


async def test_data_limits_are_clear_errors(tier_factory: Any, config: Any) -> None:
    tier = tier_factory(_with(config, max_value_bytes=10, max_data_bytes=20, max_fields=2))
    token = await tier.sessions.new()
    with pytest.raises(DataTooLarge):
        await tier.sessions.update(token, {"a": "x" * 20})
    await tier.sessions.update(token, {"a": "x" * 6, "b": "y" * 6})
    with pytest.raises(DataTooLarge):
        await tier.sessions.update(token, {"c": 1})
    with pytest.raises(DataTooLarge):
        await tier.sessions.update(token, {"a": "x" * 8, "b": "y" * 8, "c": 1})
    with pytest.raises(InvalidInput):
        await tier.sessions.update(token, {"a": object()})
    with pytest.raises(InvalidInput):
        await tier.sessions.update(token, {"a": float("nan")})
    assert await tier.sessions.data(token) == {"a": "x" * 6, "b": "y" * 6}


async def test_carts_set_get_clear(tier: Any) -> None:
    token = await tier.sessions.new()
    await tier.carts.set(token, "a", 2)
    await tier.carts.set(token, "b", 1)
    await tier.carts.set(token, "a", 0)
    assert await tier.carts.get(token) == {"b": 1}
    await tier.carts.clear(token)
    assert await tier.carts.get(token) == {}
    with pytest.raises(UnknownSession):
        await tier.carts.set(webtier.sessions.new_token(), "a", 1)


async def test_cart_limits_are_clear_errors(tier_factory: Any, config: Any) -> None:
    tier = tier_factory(_with(config, cart_lines=2, cart_count=5))
    token = await tier.sessions.new()
    await tier.carts.set(token, "a", 5)
    await tier.carts.set(token, "b", 1)
    with pytest.raises(CartLimit):
        await tier.carts.set(token, "c", 1)
    with pytest.raises(CartLimit):
        await tier.carts.set(token, "a", 6)
    with pytest.raises(InvalidInput):
        await tier.carts.set(token, "a", 1.5)
    with pytest.raises(InvalidInput):
        await tier.carts.set(token, "", 1)
    await tier.carts.set(token, "b", 3)
    assert await tier.carts.get(token) == {"a": 5, "b": 3}


@pytest.mark.matrix
async def test_the_cleaner_keeps_the_newest_sessions(
    tier_factory: Any, config: Any, redis_url: str, prefix: str
) -> None:
    tier = tier_factory(_with(config, shards=4, clean_batch=3))
    tokens = [await tier.sessions.new(user=f"u{i % 3}") for i in range(10)]
    for token in tokens:
        await tier.carts.set(token, "x", 1)
    for token in tokens[:4]:
        await tier.sessions.touch(token)  # now the newest four
    report = await tier.sessions.clean(keep=4)
    assert report.deleted == 6
    assert report.remaining == 4
    assert not report.more
    assert [await tier.sessions.check(t) is not None for t in tokens] == [True] * 4 + [False] * 6
    assert len(all_keys(redis_url, f"{prefix}:*:t:*")) == 4
    users = []
    for user in ("u0", "u1", "u2"):
        users += [s.user for s in await tier.sessions.of_user(user)]
    assert sorted(users) == ["u0", "u0", "u1", "u2"]
    again = await tier.sessions.clean(keep=4)
    assert (again.deleted, again.remaining) == (0, 4)


@pytest.mark.matrix
async def test_the_cleaner_keeps_exactly_the_newest_of_many(tier_factory: Any, config: Any) -> None:
    """Enough sessions per shard that the cleaner chooses from sampled
    scores (a threshold), then from whole pages near the limit."""
    tier = tier_factory(_with(config, shards=4, clean_batch=150))
    tokens = [await tier.sessions.new() for _ in range(500)]
    order = random.Random(3).sample(tokens, len(tokens))
    for token in order:
        await tier.sessions.touch(token)
    report = await tier.sessions.clean(keep=120)
    assert (report.deleted, report.spared, report.remaining) == (380, 0, 120)
    assert report.steps >= 3  # at most 150 a step
    alive = {t for t in tokens if await tier.sessions.info(t) is not None}
    assert alive == set(order[-120:])


@pytest.mark.matrix
def test_the_pick_script_answers_as_the_cleaner_reads_it(sync_client: Any, prefix: str) -> None:

    key = f"{prefix}:{{s:0}}:recent"
    seconds, _ = sync_client.time()
    now = seconds * 10**6
    # Whole µs scores: 30 idle for an hour or more, 70 recent.
    scores = sorted([now - 3_600 * 10**6 - i for i in range(30)] + [now - i for i in range(70)])
    sync_client.zadd(key, {f"token{i}": score for i, score in enumerate(scores)})
    age = 1_800 * 10**6
    for page in (1, 4, 5, 6, 38, 100, 1000):
        reply = sync_client.eval(sessions.layout.PICK.source, 1, key, age, page, "sample")
        cutoff = int(reply[0])
        assert now - age - 10**6 < cutoff < now - age + 60 * 10**6
        assert reply == sampled_pick(scores, cutoff, page)
        whole = sync_client.eval(sessions.layout.PICK.source, 1, key, age, page, "all")
        assert int(whole[0]) >= cutoff
        assert whole[1:] == [100, 30, *(str(x).encode() for x in scores[:page])]
    sync_client.delete(key)
    assert sync_client.eval(sessions.layout.PICK.source, 1, key, age, 5, "sample")[1:] == [0, 0]


@pytest.mark.matrix
async def test_idle_timeout_is_enforced_by_redis(
    tier_factory: Any, config: Any, redis_url: str, prefix: str
) -> None:
    slow = tier_factory(_with(config, idle_timeout=30))
    token = await slow.sessions.new()
    client = webtier.connect(redis_url)
    try:
        (key,) = all_keys(redis_url, f"{prefix}:*:t:*")
        assert 0 < client.pttl(key) <= 30_000
    finally:
        webtier.disconnect(client)
    # Expiry itself: only ever checked after the timeout has surely passed.
    tier = tier_factory(_with(config, idle_timeout=0.3))
    await tier.sessions.touch(token, item="1")
    await anyio.sleep(0.8)
    assert await tier.sessions.info(token) is None
    assert not await tier.sessions.touch(token)
    report = await tier.sessions.clean()
    assert report.remaining == 0
    assert all_keys(redis_url, f"{prefix}:{{s:*") == []


@pytest.mark.matrix
async def test_absolute_timeout_is_not_extended_by_touches(
    tier_factory: Any, config: Any, redis_url: str, prefix: str
) -> None:
    tier = tier_factory(_with(config, absolute_timeout=30, idle_timeout=60))
    token = await tier.sessions.new()
    client = webtier.connect(redis_url)
    try:
        (key,) = all_keys(redis_url, f"{prefix}:*:t:*")
        deadline = client.pttl(key)
        assert 0 < deadline <= 30_000
        for _ in range(3):
            await anyio.sleep(0.05)
            assert await tier.sessions.touch(token)
            assert 0 < client.pttl(key) <= deadline  # idle would give 60 s
    finally:
        webtier.disconnect(client)
    short = tier_factory(_with(config, absolute_timeout=0.3, idle_timeout=60))
    token = await short.sessions.new()
    await anyio.sleep(0.8)
    assert not await short.sessions.touch(token)


@pytest.mark.matrix
async def test_every_key_has_an_expiry_backstop(
    tier_factory: Any, config: Any, redis_url: str, prefix: str
) -> None:
    tier = tier_factory(_with(config, backstop=3600))
    token = await tier.sessions.new(user="dave")
    await tier.sessions.touch(token, item="1")
    await tier.carts.set(token, "1", 1)
    client = webtier.connect(redis_url)
    try:
        keys = all_keys(redis_url, f"{prefix}:*")
        assert len(keys) == 4  # the session, its shard's index, the user's index, the ranking
        for key in keys:
            if not key.endswith(b":viewed"):  # the ranking is not the session's
                # The session's and its index's backstop may come a 64th late.
                assert 3_000_000 < client.pttl(key) <= 3_600_000 + 3_600_000 // 64, key
    finally:
        webtier.disconnect(client)


def _server_ms(client: Any) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def _expiry(client: Any, key: str | bytes, *, session: bool = True) -> int:
    """When ``key`` expires, server ms, from its TTL (PEXPIRETIME needs 7.0)
    read between two readings of the server's clock. A session's is the ``e``
    it records, checked to lie in that window (a few ms of slack); for any
    other key, the latest it can be."""
    before = _server_ms(client)
    left = client.pttl(key)
    after = _server_ms(client)
    if not session:
        return after + left
    recorded = int(client.hget(key, "e"))
    earliest, latest = before + left, after + left
    assert earliest - 5 <= recorded <= latest + 5, (recorded, earliest, latest)
    return recorded


@pytest.mark.matrix
async def test_the_backstop_moves_lazily_and_never_early(
    tier_factory: Any, config: Any, sync_client: Any
) -> None:
    """The backstop is written a 64th late and left while it is far enough
    ahead; after every touch, the key expires no sooner than the backstop
    and no later than a 64th after it, and ``e`` says when; the shard's
    index outlives the session."""
    backstop_ms = 640_000
    late = backstop_ms // 64
    tier = tier_factory(_with(config, backstop=backstop_ms / 1000))
    token = await tier.sessions.new()
    where = sessions.layout.place(tier.config, token)

    def check(key: str, backstop: int) -> int:
        left = sync_client.pttl(key)
        assert backstop - 100 <= left <= backstop + backstop // 64, left
        expires = _expiry(sync_client, key)
        index = _expiry(sync_client, where.recent, session=False)
        assert index >= expires - 20, "the index outlives the session"
        return int(sync_client.hget(key, "e"))

    first = check(where.key, backstop_ms)
    for item in ("1", "2", "3"):
        await anyio.sleep(0.02)
        assert await tier.sessions.touch(token, item=item)
        assert check(where.key, backstop_ms) == first  # far enough ahead: not written again
    # As if written long ago: the next touch finds it due and moves it.
    stale = first - late - 5_000
    sync_client.hset(where.key, "e", stale)
    sync_client.pexpireat(where.key, stale)
    assert await tier.sessions.touch(token)
    assert check(where.key, backstop_ms) > first
    # A shorter backstop takes effect at the next touch.
    short = tier_factory(_with(config, backstop=64))
    assert await short.sessions.touch(token, item="4")
    check(where.key, 64_000)
    assert await short.sessions.recently_viewed(token) == ["4", "3", "2", "1"]
    # A login writes the expiry of the session under its new token the same way.
    moved = (await short.sessions.login(token, "alice")).token
    check(sessions.layout.place(tier.config, moved).key, 64_000)


@pytest.mark.matrix
async def test_an_idle_timeout_is_moved_by_every_touch(
    tier_factory: Any, config: Any, sync_client: Any
) -> None:
    tier = tier_factory(_with(config, idle_timeout=60))
    token = await tier.sessions.new()
    key = sessions.layout.place(tier.config, token).key
    before = _expiry(sync_client, key)
    for _ in range(3):
        await anyio.sleep(0.02)
        assert await tier.sessions.touch(token, item="1")
        after = _expiry(sync_client, key)
        assert after > before + 10, "exact: every touch restarts it"
        assert 59_000 < sync_client.pttl(key) <= 60_000
        before = after


async def test_non_strict_mode_takes_caller_tokens_and_creates(
    tier_factory: Any, config: Any
) -> None:
    tier = tier_factory(_with(config, strict=False))
    token = str(uuid.uuid4())
    assert await tier.sessions.touch(token, user="erin", item="3")
    assert await tier.sessions.check(token) == "erin"
    await tier.carts.set(str(uuid.uuid4()), "a", 1)  # the book's add_to_cart on a new session


@pytest.mark.onlycluster
def test_sessions_spread_over_the_cluster(redis_url: str, config: Any) -> None:
    client = webtier.connect(redis_url)
    try:
        routes = [config.keys.session_shard(s) for s in range(config.sessions.shards)]
        nodes = {client.get_node_from_key(route).name for route in routes}
        users = {
            client.get_node_from_key(config.keys.user_sessions(f"u{n}", 64)).name for n in range(64)
        }
    finally:
        webtier.disconnect(client)
    assert len(nodes) == 3
    assert len(users) == 3
