"""The hot key's client-side helpers on real Redis: the view aggregator and
the cached top N, on every target, through both APIs where they differ."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

import webtier
from webtier.config import Config
from webtier.errors import InvalidInput
from webtier.testing import RedisServer


def scores(url: str, config: Config) -> dict[str, float]:
    client = webtier.connect(url)
    try:
        found = client.zrange(config.keys.ranking(1)[0].viewed, 0, -1, withscores=True)
    finally:
        webtier.disconnect(client)
    return {item.decode(): score for item, score in found}


# -- the aggregator -------------------------------------------------------------------------


def test_views_counted_in_process_from_many_threads_add_up(redis_url: str, config: Config) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    threads, views = 4, 5000
    start = threading.Barrier(threads)

    def count() -> None:
        start.wait(timeout=60)
        for i in range(views):
            # The sessions hook: nothing to send while the aggregator counts.
            assert tier.ranking.view_requests(f"item{i % 10}") == ()

    with tier.ranking.aggregator(flush_interval=0.01) as aggregator:
        running = [threading.Thread(target=count) for _ in range(threads)]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join(timeout=120)
        tier.ranking.record_view("direct")  # also counted in process
    assert aggregator.close().sent == 0  # closed already: nothing left
    assert scores(redis_url, config) == {
        **{f"item{i}": threads * views / 10 for i in range(10)},
        "direct": 1.0,
    }
    # Closed: views go to Redis directly again.
    (request,) = tier.ranking.view_requests("after")
    assert request.commands[0][0] == "ZINCRBY"
    tier.ranking.record_view("after")
    assert scores(redis_url, config)["after"] == 1.0
    webtier.disconnect(client)


def test_a_bad_item_is_refused_when_counted_in_process(redis_url: str, config: Config) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    with tier.ranking.aggregator(flush_interval=3600):
        for bad in ("", "a\nb", 42):
            with pytest.raises(InvalidInput):
                tier.ranking.view_requests(bad)
    assert scores(redis_url, config) == {}
    webtier.disconnect(client)


@pytest.mark.anyio
async def test_async_aggregator(redis_url: str, config: Config) -> None:
    client = webtier.connect_async(redis_url)
    tier = webtier.AsyncWebTier(client, config)
    async with tier.ranking.aggregator(flush_interval=3600) as aggregator:
        for i in range(3000):
            assert tier.ranking.view_requests(f"item{i % 3}") == ()
        await tier.ranking.record_view("item0")
        assert scores(redis_url, config) == {}  # not flushed yet
        report = await aggregator.flush()
        assert report.sent > 0
        assert scores(redis_url, config) == {"item0": 1001.0, "item1": 1000.0, "item2": 1000.0}
    await tier.ranking.record_view("item2")  # closed: straight to Redis
    assert scores(redis_url, config)["item2"] == 1001.0
    await client.aclose()


def test_a_flush_that_cannot_reach_redis_is_kept_for_the_next(config: Config) -> None:
    server = RedisServer.start()
    client = webtier.connect(server.url, socket_connect_timeout=0.5)
    tier = webtier.WebTier(client, Config(prefix=config.prefix, retry=webtier.RetryPolicy(0)))
    try:
        with tier.ranking.aggregator(flush_interval=3600) as aggregator:
            for _ in range(10):
                tier.ranking.record_view("x")
            server.kill()
            report = aggregator.flush()
            assert (report.sent, report.kept, report.lost) == (0, 1, 0)
            server.launch()
            assert aggregator.flush().sent == 1
        assert scores(server.url, config) == {"x": 10.0}
    finally:
        webtier.disconnect(client)
        server.stop()


# -- the cached top N ---------------------------------------------------------------------


def test_top_items_answer_from_the_copy_and_follow_the_ranking(
    redis_url: str, config: Config
) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    client.zadd(config.keys.ranking(1)[0].viewed, {f"item{i}": i for i in range(20)})
    with tier.ranking.top_items(10, refresh=3600) as top:
        assert top.refresh_now()  # the thread loads it too; this waits for a copy
        assert len(top) == 10
        assert top.rank("item19") == 0
        assert top.admits("item10")
        assert not top.admits("item9")  # 11th: outside the set
        assert not top.admits("item10", top=9)
        assert top.admits("item11", top=9)
        for bad in (11, -1, True, 2.0):
            with pytest.raises(InvalidInput):
                top.admits("item19", top=bad)  # type: ignore[arg-type]
        client.zadd(config.keys.ranking(1)[0].viewed, {"rising": 100})
        assert not top.admits("rising")  # not until the next refresh
        assert top.refresh_now()
        assert top.rank("rising") == 0
        assert not top.admits("item10")
    webtier.disconnect(client)


def test_top_items_refresh_on_their_own(redis_url: str, config: Config) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    with tier.ranking.top_items(5, refresh=0.05) as top:
        assert not top.admits("late")
        client.zadd(config.keys.ranking(1)[0].viewed, {"late": 1})
        seen = threading.Event()
        for _ in range(2000):  # up to 20 s on a busy machine
            if top.admits("late"):
                seen.set()
                break
            seen.wait(0.01)
        assert seen.is_set(), "the copy was never refreshed"
    webtier.disconnect(client)


def test_top_items_keep_their_copy_through_an_outage(
    config: Config, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer.start()
    client = webtier.connect(server.url, socket_connect_timeout=0.5)
    tier = webtier.WebTier(client, Config(prefix=config.prefix, retry=webtier.RetryPolicy(0)))
    client.zadd(config.keys.ranking(1)[0].viewed, {"a": 2, "b": 1})
    caplog.set_level(logging.WARNING, logger="webtier.ranking")
    try:
        with tier.ranking.top_items(10, refresh=3600) as top:
            assert top.refresh_now()
            server.kill()
            assert not top.refresh_now()
            assert not top.refresh_now()
            assert top.admits("a")  # the last copy still answers
            assert top.rank("b") == 1
            failed = [r for r in caplog.records if "refresh failed" in r.getMessage()]
            assert len(failed) == 1, "an outage is logged once, not per refresh"
            server.launch()
            assert top.refresh_now()
            assert top.admits("a") is False  # a fresh server has no ranking
    finally:
        webtier.disconnect(client)
        server.stop()


@pytest.mark.anyio
async def test_async_top_items(redis_url: str, config: Config) -> None:
    client = webtier.connect_async(redis_url)
    tier = webtier.AsyncWebTier(client, config)
    await tier.ranking.record_view("a")
    async with tier.ranking.top_items(3, refresh=0.05) as top:
        for _ in range(2000):  # the task loads it at once
            if top.admits("a"):
                break
            await asyncio.sleep(0.01)
        assert top.rank("a") == 0
        await tier.ranking.record_view("b")
        await tier.ranking.record_view("b")
        assert await top.refresh_now()
        assert top.rank("b") == 0
    await client.aclose()


def test_bad_top_items_settings(redis_url: str, config: Config) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    for bad in ({"n": 0}, {"n": True}, {"refresh": 0}):
        with pytest.raises(webtier.ConfigError):
            tier.ranking.top_items(**bad)
    webtier.disconnect(client)
