"""Sessions on a stalled and on a restarted server."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import webtier
from tests.conftest import wait_for
from tests.integration.test_faults import stall
from webtier.config import Config, RetryPolicy
from webtier.testing import RedisServer


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer.start() as running:
        yield running


def test_a_touch_whose_reply_is_lost_is_applied_at_most_once(server: RedisServer) -> None:
    tier = webtier.WebTier(server.client(socket_timeout=0.3), Config(prefix="stall"))
    token = tier.sessions.new()
    assert tier.sessions.touch(token, item="42")
    before = tier.sessions.info(token)
    sleeper = stall(server, 1.5)
    with pytest.raises(webtier.OutcomeUnknown):
        tier.sessions.touch(token, item="42")
    sleeper.join()
    # Sent once, never again: the view is counted twice in all, not three times.
    assert tier.ranking.top(1) == [("42", 2.0)]
    after = tier.sessions.info(token)
    assert after is not None
    assert after.last_seen > before.last_seen
    assert tier.sessions.recently_viewed(token) == ["42"]


@pytest.mark.parametrize("attempts", [0, 5])
def test_a_login_during_a_stall_is_whole_or_not_at_all(server: RedisServer, attempts: int) -> None:
    policy = RetryPolicy(attempts=attempts, backoff=0.1, backoff_cap=0.5)
    tier = webtier.WebTier(
        server.client(socket_timeout=0.3), Config(prefix=f"login{attempts}", retry=policy)
    )
    token = tier.sessions.new()
    tier.carts.set(token, "hat", 1)
    tier.sessions.update(token, {"theme": "dark"})
    sleeper = stall(server, 1.0)
    try:
        new_token = tier.sessions.login(token, "alice").token
    except webtier.RedisUnavailable:
        new_token = None
    finally:
        sleeper.join()
    live = [t for t in (token, new_token) if t and tier.sessions.info(t) is not None]
    listed = tier.sessions.of_user("alice")
    if attempts:
        assert live == [new_token], "reads ride out the stall and the login completes"
    # One session, whole, under one token: the old one or the new one.
    assert len(live) == 1
    (survivor,) = live
    assert tier.carts.get(survivor) == {"hat": 1}
    assert tier.sessions.data(survivor) == {"theme": "dark"}
    assert len(listed) == (1 if survivor != token else 0)


def test_a_restart_ends_sessions_cleanly_and_strict_touch_does_not_revive_them(
    server: RedisServer,
) -> None:
    tier = webtier.WebTier(server.client(socket_timeout=1), Config(prefix="restart"))
    token = tier.sessions.new(user="alice")
    outcomes: dict[str, int] = {"ok": 0, "gone": 0, "unavailable": 0}
    other: list[BaseException] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            try:
                touched = tier.sessions.touch(token, item="7")
                outcomes["ok" if touched else "gone"] += 1
            except webtier.RedisUnavailable:  # OutcomeUnknown included
                outcomes["unavailable"] += 1
            except BaseException as error:
                other.append(error)
                return

    loader = threading.Thread(target=load)
    loader.start()
    try:
        wait_for(lambda: outcomes["ok"] > 0, "no touch succeeded before the restart")
        server.kill()
        wait_for(lambda: outcomes["unavailable"] > 0 or other, "no touch failed while down")
        server.launch()  # same port, empty (no persistence): the session is gone
        wait_for(lambda: outcomes["gone"] > 0 or other, "touching did not resume")
    finally:
        stop.set()
        loader.join()
    assert other == []
    assert tier.sessions.check(token) is None
    assert tier.sessions.info(token) is None  # never re-created by a strict touch
    fresh = tier.sessions.new(user="alice")  # scripts reloaded on the new server
    assert tier.sessions.check(fresh) == "alice"
