"""Workers: schedule, liveness, warm and cold stop, riding out an outage."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import webtier
from tests.helpers.ops import slow_job
from webtier._core.protocol import Op, pause, write
from webtier.config import Config
from webtier.testing import RedisServer
from webtier.types import JobStep
from webtier.workers import JOBS, AsyncWorker, Job, Worker, liveness

NOW = 1_700_000_000


def test_once_runs_each_job_and_unregisters(redis_url: str, config: Config) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    tier.counters.record("c", 1, now=NOW)
    Worker(tier, once=True, heartbeat=0.1).run()
    assert tier.workers.alive() == []
    webtier.disconnect(client)


def test_a_worker_given_no_jobs_runs_none(redis_url: str, config: Config) -> None:
    """``()`` is no job (it only announces itself), where it ran every job:
    a rescale it was never asked for halved a test's view counts."""
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    tier.ranking.record_view("item1")
    worker = Worker(tier, (), heartbeat=0.1, once=True)
    assert worker.jobs == []
    worker.run()
    assert tier.ranking.top(1) == [("item1", 1.0)]
    webtier.disconnect(client)


def test_liveness_key_while_running(redis_url: str, config: Config) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    worker = Worker(tier, heartbeat=0.2)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not tier.workers.alive():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (info,) = tier.workers.alive()
        assert info.id == worker.id
        assert info.jobs == tuple(JOBS)
        assert 0 < client.pttl(config.keys.worker(worker.id)) <= 600
    finally:
        worker.request_stop()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert tier.workers.alive() == []
    webtier.disconnect(client)


def test_the_index_of_workers_expires_after_the_last_heartbeat(
    redis_url: str, config: Config
) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    info = liveness.WorkerInfo("w1", "host", 1, NOW, ("rows",), time.time())
    tier.transport.run(liveness.heartbeat(config, info, 15.0))  # then it died
    assert 0 < client.pttl(config.keys.worker("w1")) <= 15_000
    assert 15_000 < client.pttl(config.keys.workers) <= 15_000 + liveness.DEAD_KEPT_MS
    webtier.disconnect(client)


def test_warm_stop_finishes_the_step_under_way(
    servers: dict[str, RedisServer], config: Config
) -> None:
    client = webtier.connect(servers["standalone"].url)
    tier = webtier.WebTier(client, config)
    worker = Worker(tier, [slow_job(0.5, "done")])
    thread = threading.Thread(target=worker.run)
    thread.start()
    time.sleep(0.2)  # inside the first step
    worker.request_stop()
    thread.join(timeout=10)
    assert client.get(f"{config.prefix}:done") == b"1"  # finished, and no second step
    webtier.disconnect(client)


COLD = """
import sys, time, webtier
from webtier.cli.signals import stop_on_signals
from webtier.workers import ColdStop, Worker
from tests.helpers.ops import slow_job
tier = webtier.WebTier(webtier.connect({url!r}), webtier.Config(prefix={prefix!r}))
worker = Worker(tier, [slow_job(600, "never")], heartbeat=0.1)
print(worker.id, flush=True)
try:
    with stop_on_signals(worker.request_stop):
        worker.run()
except ColdStop:
    sys.exit(3)
"""


def test_second_signal_stops_cold_and_still_unregisters(
    servers: dict[str, RedisServer], config: Config
) -> None:
    url = servers["standalone"].url
    code = textwrap.dedent(COLD.format(url=url, prefix=config.prefix))
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        worker_id = child.stdout.readline().strip()
        client = webtier.connect(url)
        tier = webtier.WebTier(client, config)
        deadline = time.monotonic() + 20
        while not tier.workers.alive():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)  # warm: would wait 600 s for the step
        time.sleep(0.3)
        assert child.poll() is None
        child.send_signal(signal.SIGINT)  # cold
        assert child.wait(timeout=20) == 3
    assert client.get(config.keys.worker(worker_id)) is None
    assert client.get(f"{config.prefix}:never") is None
    webtier.disconnect(client)


def test_outage_backs_off_logs_once_and_recovers(
    config: Config, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer.start()
    server.kill()  # the port is known; nothing listens on it
    client = webtier.connect(server.url, socket_connect_timeout=0.2)
    tier = webtier.WebTier(
        client, Config(prefix=config.prefix, retry=webtier.RetryPolicy(attempts=0))
    )
    worker = Worker(tier, heartbeat=0.1)
    thread = threading.Thread(target=worker.run)
    caplog.set_level(logging.INFO, logger="webtier.worker")
    thread.start()
    try:
        time.sleep(2.0)
        # One line per job that reaches Redis (counters, ranking), not per retry.
        failing = [r.args[0] for r in caplog.records if "failed" in r.getMessage()]
        assert failing, "the outage was not logged"
        assert len(failing) == len(set(failing)), "an outage is logged once, not per retry"
        server.launch()
        deadline = time.monotonic() + 30
        while not any("working again" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, "the worker did not recover"
            time.sleep(0.1)
    finally:
        worker.request_stop()
        thread.join(timeout=10)
        webtier.disconnect(client)
        server.stop()
    assert not thread.is_alive()


@pytest.mark.anyio
@pytest.mark.parametrize("which", ["webtier", "redis-py"])
async def test_async_worker_once_and_cold_stop(
    servers: dict[str, RedisServer], config: Config, which: str
) -> None:
    url = servers["standalone"].url
    client = webtier.connect_async(url, client=which, socket_timeout=None)  # type: ignore[call-overload]
    tier = webtier.AsyncWebTier(client, config)
    await AsyncWorker(tier, once=True).run()

    def blocking_step(cfg: Config, pass_number: int) -> Op[JobStep]:
        if which == "redis-py":
            # Blocks this connection (only) for 5 s.
            yield write("x", ("BLPOP", f"{cfg.prefix}:nothing", 5), idempotent=True)
        else:
            # webtier's client shares one connection: a blocking command
            # would hold every task's commands behind it. A step's wait.
            yield pause(5)
        return JobStep(0.0, "never reached")

    worker = AsyncWorker(tier, [Job("slow", blocking_step)])
    loop = asyncio.get_running_loop()
    runner = asyncio.ensure_future(worker.run())
    await asyncio.sleep(0.3)
    stopped_at = loop.time()
    worker.request_force_stop()
    await asyncio.wait_for(runner, 10)
    assert loop.time() - stopped_at < 2.5, "the step was not cancelled"
    assert await tier.workers.alive() == []
    await client.aclose()
