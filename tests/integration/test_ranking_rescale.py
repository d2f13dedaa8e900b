"""The ranking's rescale on real Redis: every target, both APIs, and many
rescalers at once (threads and processes) halving once per period."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import webtier
from tests.helpers.servers import all_keys, spawned_pool, stall
from webtier import book
from webtier._core.keys import RankingShard
from webtier.config import Config, RankingSettings
from webtier.workers import JOBS, AsyncWorker, Worker

WEEK = 7 * 86400  # a period no test run straddles (it turns Thursdays, 00:00 UTC)


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:
    client = webtier.connect(redis_url)
    yield client
    webtier.disconnect(client)


def with_ranking(config: Config, **settings: Any) -> Config:
    """``config`` with these ranking settings, in the book's one-key layout
    unless ``shards`` is given (the sharded rescale has tests of its own)."""
    return dataclasses.replace(config, ranking=RankingSettings(**{"shards": 1, **settings}))


def one_key(config: Config) -> RankingShard:
    """The ranking's keys in the book's one-key layout."""
    (shard,) = config.keys.ranking(1)
    return shard


def scores(client: Any, config: Config) -> dict[str, float]:
    found = client.zrange(one_key(config).viewed, 0, -1, withscores=True)
    return {item.decode(): score for item, score in found}


def new_period(client: Any, config: Config) -> None:
    """Let the next rescale run as if a new period had begun."""
    client.delete(one_key(config).rescaled)


@pytest.mark.anyio
@pytest.mark.matrix
async def test_rescale_keeps_the_most_viewed_and_halves_once(
    tier_factory: Any, config: Config, client: Any
) -> None:
    config = with_ranking(config, keep=10, interval=WEEK)
    tier = tier_factory(config)
    client.zadd(one_key(config).viewed, {f"item{i}": i + 1 for i in range(30)})

    report = await tier.ranking.rescale()

    assert report.done
    assert (report.removed, report.left) == (20, 10)
    assert 0 < report.next_in <= WEEK
    assert scores(client, config) == {f"item{i}": (i + 1) / 2 for i in range(20, 30)}
    assert await tier.ranking.top(2) == [("item29", 15.0), ("item28", 14.5)]
    assert await tier.ranking.rank("item0") is None  # trimmed

    again = await tier.ranking.rescale()  # same period: nothing happens
    assert not again.done
    assert again.period == report.period
    assert scores(client, config) == {f"item{i}": (i + 1) / 2 for i in range(20, 30)}


@pytest.mark.anyio
async def test_a_new_item_climbs_past_an_old_favourite(
    tier_factory: Any, config: Config, client: Any
) -> None:
    tier = tier_factory(with_ranking(config, interval=WEEK))
    client.zadd(one_key(config).viewed, {"old": 1000})
    places = []
    for _ in range(5):  # five periods of 300 views of the new item each
        client.zincrby(one_key(config).viewed, 300, "new")
        new_period(client, config)
        assert (await tier.ranking.rescale()).done
        places.append(await tier.ranking.rank("new"))
    assert places[0] == 1, "the old favourite leads at first"
    assert places[-1] == 0, "the new favourite climbed past it"
    assert scores(client, config)["old"] == 1000 / 2**5


@pytest.mark.anyio
async def test_factor_and_an_empty_ranking(tier_factory: Any, config: Config, client: Any) -> None:
    tier = tier_factory(with_ranking(config, keep=2, factor=1, interval=WEEK))
    empty = await tier.ranking.rescale()
    assert empty.done
    assert (empty.removed, empty.left) == (0, 0)
    client.zadd(one_key(config).viewed, {"a": 3, "b": 2, "c": 1})
    new_period(client, config)
    await tier.ranking.rescale()
    assert scores(client, config) == {"a": 3.0, "b": 2.0}  # factor 1: trimmed only

    quarter = tier_factory(with_ranking(config, factor=0.25, interval=WEEK))
    new_period(client, config)
    await quarter.ranking.rescale()
    assert scores(client, config) == {"a": 0.75, "b": 0.5}


def test_a_longer_interval_neither_halves_again_nor_stops_rescaling(
    redis_url: str, config: Config, client: Any
) -> None:
    every_second = webtier.WebTier(client, with_ranking(config, interval=1))
    weekly = webtier.WebTier(client, with_ranking(config, interval=WEEK))
    every_two = webtier.WebTier(client, with_ranking(config, interval=2))
    client.zadd(one_key(config).viewed, {"a": 2**10})
    assert every_second.ranking.rescale().done
    assert not weekly.ranking.rescale().done, "this week was rescaled a moment ago"
    done = threading.Event()
    for _ in range(3000):  # a new two-second period begins within 2 s (30 s allowed)
        if every_two.ranking.rescale().done:
            done.set()
            break
        done.wait(0.01)
    assert done.is_set(), "a longer interval stopped the rescales"
    assert scores(client, config) == {"a": 2.0**8}


# -- many rescalers at once ---------------------------------------------------------------


@pytest.mark.matrix
def test_rescalers_in_threads_halve_once(redis_url: str, config: Config, client: Any) -> None:
    config = with_ranking(config, interval=WEEK)
    client.zadd(one_key(config).viewed, {"a": 2**40, "b": 2**20})
    threads = 8
    start = threading.Barrier(threads)
    reports: list[Any] = []

    def rescale() -> None:
        own = webtier.connect(redis_url)
        try:
            tier = webtier.WebTier(own, config)
            start.wait(timeout=60)
            reports.append(tier.ranking.rescale())
        finally:
            webtier.disconnect(own)

    running = [threading.Thread(target=rescale) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join(timeout=60)
    assert len(reports) == threads
    assert sum(r.done for r in reports) == 1
    assert scores(client, config) == {"a": 2.0**39, "b": 2.0**19}


def _rescale_until(url: str, prefix: str, start: float, until: float) -> list[int]:
    """Rescale back to back until ``until``; the periods this process rescaled."""
    config = Config(prefix=prefix, ranking=RankingSettings(interval=1))
    client = webtier.connect(url)
    tier = webtier.WebTier(client, config)
    done = []
    time.sleep(max(0.0, start - time.time()))
    # A process that started late (a loaded machine) still sees a few periods.
    until = max(until, time.time() + 3.5)
    while time.time() < until:
        report = tier.ranking.rescale()
        if report.done:
            done.append(report.period)
    webtier.disconnect(client)
    return done


@pytest.mark.slow
def test_rescalers_in_processes_halve_once_per_period(
    redis_url: str, config: Config, client: Any
) -> None:
    client.zadd(one_key(config).viewed, {"a": 2**60})
    with spawned_pool(4) as pool:
        start = time.time() + 1  # every process begins together, its client built
        until = start + 4.5  # several one-second periods
        runs = [
            pool.apply_async(_rescale_until, (redis_url, config.prefix, start, until))
            for _ in range(4)
        ]
        done = [period for run in runs for period in run.get(timeout=120)]
    assert len(done) == len(set(done)), f"a period was rescaled twice: {sorted(done)}"
    assert len(done) >= 2, "the rescalers barely ran"
    assert scores(client, config) == {"a": 2.0 ** (60 - len(done))}


# -- the worker job and the book's functions ----------------------------------------------


def test_the_worker_job_rescales_once_per_period(redis_url: str, config: Config) -> None:
    config = with_ranking(config, interval=WEEK)
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    client.zadd(one_key(config).viewed, {"a": 8})
    Worker(tier, [JOBS["ranking"]], once=True).run()
    Worker(tier, [JOBS["ranking"]], once=True).run()  # same period: no second halving
    assert scores(client, config) == {"a": 4.0}
    step = tier.transport.run(JOBS["ranking"].step(config, 0))
    assert step.summary == ""  # another rescaled this period: nothing to say
    assert 0 < step.delay <= WEEK + 1  # until the next period
    webtier.disconnect(client)


@pytest.mark.anyio
async def test_the_async_worker_runs_the_job(redis_url: str, config: Config, client: Any) -> None:
    config = with_ranking(config, keep=1, interval=WEEK)
    aclient = webtier.connect_async(redis_url)
    tier = webtier.AsyncWebTier(aclient, config)
    client.zadd(one_key(config).viewed, {"a": 8, "b": 1})
    for _ in range(2):
        await AsyncWorker(tier, [JOBS["ranking"]], once=True).run()
    assert scores(client, config) == {"a": 4.0}
    await aclient.aclose()


@pytest.fixture
def book_conn(redis_url: str) -> Iterator[Any]:

    conn = webtier.connect(redis_url, decode_responses=True)
    for key in all_keys(redis_url, "webtier:*"):  # the book's functions use the default prefix
        conn.delete(key)
    yield conn
    webtier.disconnect(conn)


def test_book_functions(book_conn: Any) -> None:
    seconds, _ = book_conn.time()
    if 300 - seconds % 300 < 3:  # keep both passes in one 5-minute period
        time.sleep(300 - seconds % 300 + 0.1)
    tier = book.tier_for(book_conn)
    for item, views in (("a", 4), ("b", 8), ("c", 2)):
        for _ in range(views):
            tier.ranking.record_view(item)
    assert book.top_viewed(book_conn, 2) == [("b", 8.0), ("a", 4.0)]
    assert [book.view_rank(book_conn, i) for i in ("b", "a", "c", "z")] == [0, 1, 2, None]
    book.rescale_viewed(book_conn, once=True)
    book.rescale_viewed(book_conn, once=True)  # the same period: once only
    assert book.top_viewed(book_conn, 3) == [("b", 4.0), ("a", 2.0), ("c", 1.0)]
    # The daemon rescales the next period by itself, then stops when told.
    new_period(book_conn, Config())
    stop = threading.Event()
    daemon = threading.Thread(target=book.rescale_viewed, args=(book_conn,), kwargs={"stop": stop})
    daemon.start()
    try:
        for _ in range(3000):  # up to 30 s on a busy machine
            if book.top_viewed(book_conn, 1) == [("b", 2.0)]:
                break
            stop.wait(0.01)
        assert book.top_viewed(book_conn, 3) == [("b", 2.0), ("a", 1.0), ("c", 0.5)]
    finally:
        stop.set()
        daemon.join(timeout=30)
    assert not daemon.is_alive()


def test_a_rescale_retried_through_a_stall_halves_once(config: Config) -> None:
    from webtier.testing import RedisServer

    config = dataclasses.replace(
        with_ranking(config, interval=WEEK),
        retry=webtier.RetryPolicy(attempts=50, backoff=0.1, backoff_cap=0.2),
    )
    with RedisServer.start() as server:
        client = server.client()
        tier = webtier.WebTier(server.client(socket_timeout=0.3), config)
        client.zadd(one_key(config).viewed, {"a": 64})
        new_period(client, config)
        tier.ranking.rescale()  # loads the script
        new_period(client, config)
        sleeper = stall(server, 1.5)
        # Sent, timed out, sent again: the first copy runs when the stall ends,
        # the fence turns the later ones away.
        tier.ranking.rescale()
        sleeper.join()
        assert scores(client, config) == {"a": 16.0}
        client.close()


# -- bounded with no worker ---------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.matrix
async def test_with_no_worker_the_ranking_stays_bounded_and_expires(
    tier_factory: Any, config: Config, client: Any
) -> None:
    from webtier.ranking.views import UPKEEP_EVERY

    config = with_ranking(config, keep=50, expire_after=600)
    tier = tier_factory(config)
    token = await tier.sessions.new()
    for n in range(400):  # distinct items, half through touches, half direct
        if n % 2:
            await tier.sessions.touch(token, item=f"item{n}")
        else:
            await tier.ranking.record_view(f"item{n}")
        # One process: never more than twice `keep`, plus the views between
        # two upkeeps.
        assert client.zcard(one_key(config).viewed) <= 2 * 50 + UPKEEP_EVERY
    assert 0 < client.pttl(one_key(config).viewed) <= 600_000
    # A rescale rewrites the set: the expiry stays, and so does its fence's.
    assert (await tier.ranking.rescale()).done
    assert 0 < client.pttl(one_key(config).viewed) <= 600_000
    assert 0 < client.pttl(one_key(config).rescaled) <= 2 * 300 * 1000
