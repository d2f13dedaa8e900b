"""The batched recorder on real Redis: sums, flush triggers, graceful stops."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

import webtier
from webtier.config import Config

NOW = 1_700_000_000.0


def read_total(url: str, prefix: str, name: str, precision: int = 86400) -> int:
    client = webtier.connect(url)
    try:
        tier = webtier.WebTier(client, Config(prefix=prefix))
        return sum(count for _, count in tier.counters.get(name, precision))
    finally:
        webtier.disconnect(client)


@pytest.mark.matrix
def test_sync_recorder_sums_into_the_right_slices(redis_url: str, config: Config) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    with tier.counters.recorder(flush_interval=3600) as recorder:
        for i in range(10_000):
            recorder.incr("hot", 1, NOW + (i % 3))  # three 1 s slices
        recorder.incr("cold", 5, NOW)
    assert tier.counters.get("hot", 1) == [
        (int(NOW) + s, 3334 if s == 0 else 3333) for s in range(3)
    ]
    assert tier.counters.get("cold", 5) == [(int(NOW), 5)]
    webtier.disconnect(client)


def test_max_pending_flushes_before_the_interval(redis_url: str, config: Config) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    recorder = tier.counters.recorder(flush_interval=3600, max_pending=100)
    try:
        for _ in range(100):
            recorder.incr("burst", 1, NOW)
        deadline = time.monotonic() + 10
        while tier.counters.get("burst", 1) != [(int(NOW), 100)]:
            assert time.monotonic() < deadline, "max_pending did not trigger a flush"
            time.sleep(0.02)
    finally:
        recorder.close()
        webtier.disconnect(client)


def test_interval_flushes_on_its_own(redis_url: str, config: Config) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, config)
    recorder = tier.counters.recorder(flush_interval=0.05)
    try:
        recorder.incr("tick", 2, NOW)
        deadline = time.monotonic() + 10
        while tier.counters.get("tick", 1) != [(int(NOW), 2)]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        recorder.close()
        webtier.disconnect(client)


def test_closed_recorder_refuses_increments(redis_url: str, config: Config) -> None:
    client = webtier.connect(redis_url)
    recorder = webtier.WebTier(client, config).counters.recorder()
    recorder.close()
    with pytest.raises(RuntimeError, match="closed"):
        recorder.incr("late")
    webtier.disconnect(client)


@pytest.mark.anyio
@pytest.mark.matrix
async def test_async_recorder(redis_url: str, config: Config) -> None:
    client = webtier.connect_async(redis_url)
    tier = webtier.AsyncWebTier(client, config)
    async with tier.counters.recorder(flush_interval=3600, max_pending=1_000_000) as recorder:
        for _ in range(5000):
            recorder.incr("async-hot", 1, NOW)
    assert await tier.counters.get("async-hot", 60) == [(int(NOW) - int(NOW) % 60, 5000)]
    await client.aclose()


CHILD = """
import signal, sys, time
import webtier
tier = webtier.WebTier(webtier.connect({url!r}), webtier.Config(prefix={prefix!r}))
recorder = tier.counters.recorder(flush_interval=3600, max_pending=10**9)
{setup}
for _ in range(25_000):
    recorder.incr("graceful", 1, {now})
print("ready", flush=True)
{finish}
"""


def run_child(url: str, prefix: str, setup: str, finish: str) -> subprocess.Popen[str]:
    code = CHILD.format(url=url, prefix=prefix, now=NOW, setup=setup, finish=finish)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


def test_a_normal_exit_flushes_through_atexit(redis_url: str, prefix: str) -> None:
    with run_child(redis_url, prefix, setup="", finish="sys.exit(0)") as child:
        assert child.wait(timeout=60) == 0
    assert read_total(redis_url, prefix, "graceful") == 25_000


def test_sigterm_flushes_when_asked_to(redis_url: str, prefix: str) -> None:
    with run_child(
        redis_url, prefix, setup="recorder.flush_on_signals()", finish="time.sleep(600)"
    ) as child:
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == -signal.SIGTERM  # dies of the signal, after flushing
    assert read_total(redis_url, prefix, "graceful") == 25_000


def test_sigterm_chains_to_the_previous_handler(redis_url: str, prefix: str) -> None:
    setup = "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\nrecorder.flush_on_signals()"
    with run_child(redis_url, prefix, setup=setup, finish="time.sleep(600)") as child:
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == 7
    assert read_total(redis_url, prefix, "graceful") == 25_000


ASYNC_CHILD = """
import asyncio, signal, sys
import webtier

async def main():
    tier = webtier.AsyncWebTier(webtier.connect_async({url!r}), webtier.Config(prefix={prefix!r}))
    recorder = tier.counters.recorder(flush_interval=3600, max_pending=10**9)
    recorder.flush_on_signals()
    for _ in range(25_000):
        recorder.incr("graceful", 1, {now})
    print("ready", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_async_sigterm_flushes_when_asked_to(redis_url: str, prefix: str) -> None:
    code = ASYNC_CHILD.format(url=redis_url, prefix=prefix, now=NOW)
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == -signal.SIGTERM  # dies of the signal, after flushing
    assert read_total(redis_url, prefix, "graceful") == 25_000


def test_a_name_of_any_type_is_refused_with_invalid_input(redis_url: str, config: Config) -> None:
    client = webtier.connect(redis_url)
    with webtier.WebTier(client, config).counters.recorder(flush_interval=3600) as recorder:
        for name in (["views"], {"views": 1}, b"views", 7, ""):
            with pytest.raises(webtier.InvalidInput):
                recorder.incr(name)
    webtier.disconnect(client)
