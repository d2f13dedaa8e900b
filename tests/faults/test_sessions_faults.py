"""Sessions on a stalled and on a restarted server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import webtier
from tests.helpers.servers import BackgroundLoad, stall, wait_for
from webtier.config import Config, RetryPolicy
from webtier.testing import RedisServer

pytestmark = pytest.mark.faults


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
    # webtier.connect: a plain client retries inside connect (4 tries, growing
    # backoff), which made a down server take seconds a call.
    tier = webtier.WebTier(webtier.connect(server.url, socket_timeout=1), Config(prefix="restart"))
    token = tier.sessions.new(user="alice")

    def touch() -> str:
        return "ok" if tier.sessions.touch(token, item="7") else "gone"

    with BackgroundLoad(touch) as load:
        wait_for(lambda: load.outcomes["ok"] > 0, "no touch succeeded before the restart")
        server.kill()
        wait_for(
            lambda: load.outcomes["unavailable"] > 0 or load.errors, "no touch failed while down"
        )
        server.launch()  # same port, empty (no persistence): the session is gone
        wait_for(lambda: load.outcomes["gone"] > 0 or load.errors, "touching did not resume")
    assert load.errors == []
    assert tier.sessions.check(token) is None
    assert tier.sessions.info(token) is None  # never re-created by a strict touch
    fresh = tier.sessions.new(user="alice")  # scripts reloaded on the new server
    assert tier.sessions.check(fresh) == "alice"
