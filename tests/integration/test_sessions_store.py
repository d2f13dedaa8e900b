"""The store under the frameworks' session interfaces (tier.session_store):
ids the framework picks, JSON data by key or a blob, an expiry per session,
create-only and update-only saves; every target, both APIs."""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any

import anyio
import pytest

import webtier
from tests.helpers.servers import all_keys
from webtier.config import SessionSettings
from webtier.errors import DataTooLarge, InvalidInput
from webtier.sessions import new_token
from webtier.types import StoredSession

pytestmark = pytest.mark.anyio


def _with(config: webtier.Config, **settings: Any) -> webtier.Config:
    return dataclasses.replace(config, sessions=SessionSettings(**settings))


def _pttl(redis_url: str, prefix: str) -> int:
    (key,) = all_keys(redis_url, f"{prefix}:*:t:*")
    client = webtier.connect(redis_url)
    try:
        return int(client.pttl(key))
    finally:
        webtier.disconnect(client)


@pytest.mark.matrix
async def test_a_session_is_created_once_read_and_deleted(tier: Any) -> None:
    store, sid = tier.session_store, secrets.token_hex(16)  # starsessions' ids
    data = {"user": {"id": 7, "roles": ["a", "b"]}, "n": 1.5, "none": None}
    assert await store.create(sid, data, expiry=60)
    assert not await store.create(sid, {"other": 1}, expiry=60)  # taken: nothing written
    found = await store.read(sid)
    assert found == StoredSession(data, None)
    # The JSON as stored, which a framework compares its data with at save.
    assert found.json == webtier.sessions.store.encoded(data)
    assert await store.exists(sid)
    assert await store.delete(sid)
    assert not await store.delete(sid)
    assert await store.read(sid) is None
    assert not await store.exists(sid)


@pytest.mark.matrix
async def test_a_save_writes_only_what_changed_and_never_resurrects(tier: Any) -> None:
    store, sid = tier.session_store, new_token()
    assert await store.create(sid, {"a": 1, "b": 2, "gone": 3}, expiry=60)
    # Two requests, each changing its own key of what both read.
    assert await store.save(sid, {"a": 10}, expiry=60)
    assert await store.save(sid, {"b": 20}, ["gone"], expiry=60)
    assert (await store.read(sid)).data == {"a": 10, "b": 20}
    await store.delete(sid)  # a logout in another request
    assert not await store.save(sid, {"a": 11}, expiry=60)
    assert await store.read(sid) is None


async def test_changes_are_the_keys_whose_json_differs() -> None:
    before = webtier.sessions.store.encoded({"a": [1, 2], "b": "x", "c": 1})
    after = {"a": [1, 2], "b": "y", "d": None}
    changed, removed, encoded = webtier.sessions.store.changes(before, after)
    assert changed == {"b": "y", "d": None}
    assert removed == ["c"]
    assert encoded == webtier.sessions.store.encoded(after)


@pytest.mark.matrix
async def test_ids_of_another_form_read_as_missing_and_send_nothing(
    tier: Any, redis_url: str, prefix: str
) -> None:
    store = tier.session_store
    for sid in ("1", "12345678", "someunknownkey", "x" * 129, "bad id with spaces!!", None, 7):
        assert await store.read(sid) is None
        assert not await store.exists(sid)
        assert not await store.delete(sid)
    with pytest.raises(InvalidInput):
        await store.create("12345678", {}, expiry=60)
    unknown = new_token()
    assert await store.read(unknown) is None
    assert not await store.save(unknown, {"a": 1}, expiry=60)
    assert all_keys(redis_url, f"{prefix}:*") == []  # a read never creates


@pytest.mark.matrix
async def test_each_session_has_its_own_expiry_enforced_by_redis(
    tier_factory: Any, config: Any, redis_url: str, prefix: str
) -> None:
    tier = tier_factory(config)
    store, sid = tier.session_store, new_token()
    assert await store.create(sid, {"a": 1}, expiry=100)
    assert 90_000 < _pttl(redis_url, prefix) <= 100_000
    assert await store.save(sid, {}, expiry=1000)
    assert 990_000 < _pttl(redis_url, prefix) <= 1_000_000
    assert await store.save(sid, {"b": 2})  # no expiry given: the session's own
    assert 990_000 < _pttl(redis_url, prefix) <= 1_000_000
    # webtier's own touch keeps the session's expiry, not the tier's backstop.
    assert await tier.sessions.touch(sid, item="42")
    assert 990_000 < _pttl(redis_url, prefix) <= 1_000_000
    # Never longer than the tier's idle timeout (the cleaner's idea of stale).
    capped = tier_factory(_with(config, idle_timeout=50))
    assert await capped.session_store.save(sid, {}, expiry=1000)
    assert 40_000 < _pttl(redis_url, prefix) <= 50_000
    # An expiry of 0 or less: a save deletes, a create stores nothing.
    assert await store.save(sid, {}, expiry=-10)
    assert await store.read(sid) is None
    assert await store.create(new_token(), {"a": 1}, expiry=0)
    assert all_keys(redis_url, f"{prefix}:*:t:*") == []
    # Expiry itself: only checked after it has surely passed.
    short = new_token()
    assert await store.create(short, {"a": 1}, expiry=0.3)
    await anyio.sleep(0.8)
    assert await store.read(short) is None
    assert not await store.save(short, {"a": 2}, expiry=60)


@pytest.mark.matrix
async def test_rotate_moves_the_session_to_a_new_id_at_once(
    tier: Any, redis_url: str, prefix: str
) -> None:
    store, sid = tier.session_store, new_token()
    assert await store.create(sid, {"a": 1}, expiry=100)
    assert await tier.carts.set(sid, "book", 2) is None
    moved = await store.rotate(sid)
    assert moved is not None
    assert moved != sid
    assert await store.read(sid) is None
    assert not await store.save(sid, {"a": 2}, expiry=100)  # the old id stays dead
    assert (await store.read(moved)).data == {"a": 1}
    assert await tier.carts.get(moved) == {"book": 2}
    assert 90_000 < _pttl(redis_url, prefix) <= 100_000  # its own expiry moved with it
    assert await store.rotate(sid) is None
    assert await store.rotate("12345678") is None
    assert (await tier.sessions.stats()).sessions == 1
    logged_in = (await tier.sessions.login(await tier.sessions.new(), "ann")).token
    with pytest.raises(InvalidInput):
        await store.rotate(logged_in)


@pytest.mark.matrix
async def test_a_users_framework_sessions_are_listed_and_revoked(tier: Any) -> None:
    store, sid, other = tier.session_store, new_token(), new_token()
    assert await store.create(sid, {"a": 1}, expiry=100)
    assert await store.save(sid, {"_auth_user_id": "7"}, expiry=100, user="7")  # a login
    assert await store.create(other, {"_auth_user_id": "7"}, expiry=100, user="7")
    assert len(await tier.sessions.of_user("7")) == 2
    with pytest.raises(InvalidInput):
        await store.rotate(sid)  # not as its user knows it: nothing moved
    moved = await store.rotate(sid, user="7")
    listed = await tier.sessions.of_user("7")
    assert len(listed) == 2
    assert await tier.sessions.revoke("7", listed[0].id)
    assert len(await tier.sessions.of_user("7")) == 1
    assert await tier.sessions.revoke_all("7") == 1
    assert await store.read(moved) is None
    assert await store.read(other) is None
    assert not await store.save(other, {"a": 2}, expiry=100, user="7")  # never resurrected
    anonymous = new_token()
    assert await store.create(anonymous, {"_auth_user_id": "8"}, expiry=100, user="8")
    assert await store.save(anonymous, {}, ["_auth_user_id"], expiry=100)  # a logout
    assert await tier.sessions.of_user("8") == []


@pytest.mark.matrix
async def test_a_blob_is_stored_as_given(tier: Any) -> None:
    store, sid = tier.session_store, secrets.token_hex(16)
    blob = bytes(range(256))
    assert await store.create(sid, expiry=60, blob=blob)
    assert await store.read(sid) == StoredSession({}, blob)
    assert await store.save(sid, {}, expiry=60, blob=b"{}")
    assert (await store.read(sid)).blob == b"{}"


@pytest.mark.matrix
async def test_the_deployments_limits_hold_and_nothing_is_written_past_them(
    tier_factory: Any, config: Any
) -> None:
    tier = tier_factory(_with(config, max_fields=3, max_data_bytes=100, max_value_bytes=50))
    store, sid = tier.session_store, new_token()
    assert await store.create(sid, {"a": 1, "b": 2}, expiry=60)
    with pytest.raises(DataTooLarge):
        await store.save(sid, {"c": 3, "d": 4}, expiry=60)
    with pytest.raises(DataTooLarge):
        await store.save(sid, {"c": "x" * 60}, expiry=60)
    with pytest.raises(DataTooLarge):
        await store.save(sid, {}, expiry=60, blob=b"x" * 101)
    assert await store.save(sid, {"c": 3, "d": 4}, ["a"], expiry=60)  # 3 fields after
    assert (await store.read(sid)).data == {"b": 2, "c": 3, "d": 4}
    with pytest.raises(InvalidInput):
        await store.save(sid, {"nan": float("nan")}, expiry=60)


@pytest.mark.matrix
async def test_stored_sessions_are_in_the_capped_store(tier: Any) -> None:
    for _ in range(3):
        assert await tier.session_store.create(new_token(), {"a": 1}, expiry=60)
    assert (await tier.sessions.stats()).sessions == 3
