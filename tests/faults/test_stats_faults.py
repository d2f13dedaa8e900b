"""Statistics under faults, on servers of their own: a stalled server, a
restart mid-load, a script cache flushed."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

import webtier
from tests.helpers.servers import stall
from webtier.config import Config, RetryPolicy
from webtier.stats import access_time
from webtier.testing import RedisServer

pytestmark = pytest.mark.faults

ACCESS = "AccessTime"


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer.start() as running:
        yield running


def test_a_stalled_server_never_gets_a_value_twice(server: RedisServer) -> None:
    tier = webtier.WebTier(server.client(socket_timeout=0.3), Config(prefix="stall"))
    tier.stats.record("/", ACCESS, 1.0)  # loads the script
    sleeper = stall(server, 1.5)
    with pytest.raises(webtier.OutcomeUnknown):
        tier.stats.record("/", ACCESS, 2.0)
    sleeper.join()
    summary = webtier.WebTier(server.client(), Config(prefix="stall")).stats.get("/", ACCESS)
    # The lost reply hid an applied write: it counts once, not twice.
    assert (summary.count, summary.sum) == (2, 3.0)


def test_timed_blocks_ride_out_a_restart_and_recording_resumes(server: RedisServer) -> None:
    policy = RetryPolicy(attempts=1, backoff=0.01, backoff_cap=0.01)
    tier = webtier.WebTier(server.client(socket_timeout=0.5), Config(prefix="rs", retry=policy))
    served = {"before": 0, "after": 0}
    errors: list[BaseException] = []
    phase = "before"
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                with tier.stats.access_time("/item/{id}"):
                    time.sleep(0.001)
            except BaseException as error:  # the page must never fail
                errors.append(error)
                return
            served[phase] += 1

    worker = threading.Thread(target=serve)
    worker.start()
    time.sleep(0.4)
    server.kill()
    time.sleep(0.4)
    phase = "after"  # every record the new server gets is counted from here
    server.launch()  # same port, empty (no persistence)
    time.sleep(0.8)
    stop.set()
    worker.join()
    assert errors == []
    assert served["before"] > 0
    recorded = tier.stats.get("/item/{id}", ACCESS).count
    assert 0 < recorded <= served["after"], "recording did not resume after the restart"


def test_a_flushed_script_cache_is_reloaded(server: RedisServer) -> None:
    tier = webtier.WebTier(server.client(), Config(prefix="fl"))
    tier.stats.record("/", ACCESS, 1.0)
    with server.client() as admin:
        admin.script_flush()
    tier.stats.record("/", ACCESS, 1.0)
    assert tier.stats.get("/", ACCESS).count == 2


@pytest.fixture
def stopped_server() -> RedisServer:
    server = RedisServer.start()
    server.stop()
    return server


def test_when_redis_is_away_the_block_still_succeeds_and_it_is_logged(
    stopped_server: RedisServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(access_time, "FAILURES", access_time.failure_log())
    policy = webtier.RetryPolicy(attempts=0)
    # webtier.connect: no redis-py retry inside connect (a plain client tries 4 times)
    client = webtier.connect(stopped_server.url)
    tier = webtier.WebTier(client, webtier.Config(retry=policy))
    with caplog.at_level(logging.WARNING, logger="webtier.stats"):
        for _ in range(3):
            with tier.stats.access_time("/down"):
                pass
    lines = [r for r in caplog.records if r.name == "webtier.stats"]
    assert len(lines) == 1, "an outage is reported once, not per request"
    assert "/down" in lines[0].getMessage()
    with pytest.raises(webtier.RedisUnavailable):
        tier.stats.record("/down", ACCESS, 0.1)  # the plain API does raise
