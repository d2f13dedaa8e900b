"""The batched statistics recorder on real Redis: the same figures as
recording one by one, fewer round trips, flushes that survive an outage."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import webtier
from webtier.config import Config, RetryPolicy
from webtier.testing import RedisServer
from webtier.types import FlushReport, Summary

pytestmark = pytest.mark.usefixtures("steady_hour")

ACCESS = "AccessTime"  # ranked, not negative
DELTA = "Delta"  # neither

# (value, failed, flush after it): the flushes merge batches into a record
# that already holds values, the path of Chan et al.'s formula.
# Squares of values under 1e-154 are subnormal, with fewer bits than a double:
# below this, m2 is compared absolutely.
TINY = 1e-290

SAMPLES = st.lists(
    st.tuples(
        st.one_of(
            st.floats(0, 10, allow_subnormal=False),
            st.floats(0, 1e6, allow_subnormal=False),
            st.integers(0, 1000).map(float),
            st.floats(1e9, 1e9 + 8),  # large values, small spread
        ),
        st.booleans(),
        st.booleans(),
    ),
    min_size=1,
    max_size=60,
)


def assert_same(one: Summary, batched: Summary, exact: bool) -> None:
    """``batched`` equals ``one`` (recorded one by one): bit for bit where
    the arithmetic is the same (``exact``: one flush into an empty record),
    else to the last bits of a double for sum and m2."""
    assert (batched.count, batched.errors) == (one.count, one.errors)
    assert (batched.min, batched.max) == (one.min, one.max)
    assert batched.histogram == one.histogram
    for percent in (0, 50, 90, 99, 100):
        assert batched.percentile(percent) == one.percentile(percent)
    if exact:
        assert (batched.sum, batched.m2) == (one.sum, one.m2)
        return
    scale = max(abs(one.min or 0.0), abs(one.max or 0.0))
    assert math.isclose(batched.sum, one.sum, rel_tol=1e-12, abs_tol=1e-12 * one.count * scale)
    assert math.isclose(
        batched.m2, one.m2, rel_tol=1e-9, abs_tol=1e-12 * one.count * scale * scale + TINY
    )
    assert batched.stddev == pytest.approx(one.stddev, rel=1e-6, abs=1e-9 * scale)


@pytest.mark.matrix
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(samples=SAMPLES, stat_type=st.sampled_from([ACCESS, DELTA]), negate=st.booleans())
def test_batched_figures_equal_recording_one_by_one(
    redis_url: str, api: str, samples: list[tuple[float, bool, bool]], stat_type: str, negate: bool
) -> None:
    if negate and stat_type == DELTA:
        samples = [(-value, failed, flush) for value, failed, flush in samples]
    config = Config(prefix=f"h{uuid.uuid4().hex[:10]}")
    exact = not any(flush for _, _, flush in samples[:-1])

    def check(one: Summary, batched: Summary) -> None:
        assert_same(one, batched, exact)

    if api == "sync":
        client = webtier.connect(redis_url)
        try:
            tier = webtier.WebTier(client, config)
            with tier.stats.recorder(flush_interval=3600) as recorder:
                for value, failed, flush in samples:
                    tier.stats.record("one", stat_type, value, failed=failed)
                    recorder.record("batched", stat_type, value, failed=failed)
                    if flush:
                        assert recorder.flush().lost == 0
            found = tier.stats.get_many(["one", "batched"], stat_type)
            check(found["one"], found["batched"])
            if stat_type == ACCESS:
                assert {c for c, _ in tier.stats.slowest(10)} == {"one", "batched"}
        finally:
            webtier.disconnect(client)
        return

    async def run() -> None:
        client = webtier.connect_async(redis_url)
        try:
            tier = webtier.AsyncWebTier(client, config)
            async with tier.stats.recorder(flush_interval=3600) as recorder:
                for value, failed, flush in samples:
                    await tier.stats.record("one", stat_type, value, failed=failed)
                    recorder.record("batched", stat_type, value, failed=failed)
                    if flush:
                        assert (await recorder.flush()).lost == 0
            found = await tier.stats.get_many(["one", "batched"], stat_type)
            check(found["one"], found["batched"])
            if stat_type == ACCESS:
                assert {c for c, _ in await tier.stats.slowest(10)} == {"one", "batched"}
        finally:
            await client.aclose()

    asyncio.run(run())


@pytest.fixture
def sync_tier(sync_client: Any, config: Config) -> webtier.WebTier:
    return webtier.WebTier(sync_client, config)


def test_one_flush_is_one_call_per_context_and_type(sync_tier: webtier.WebTier) -> None:
    tier = sync_tier
    with tier.stats.recorder(flush_interval=3600) as recorder:
        for i in range(1000):
            recorder.record(f"/route/{i % 4}", ACCESS, i / 1000, failed=i % 100 == 0)
            recorder.record("/checkout", "BasketSize", i % 7)
        assert recorder.flush() == FlushReport(5, 0, 0)
        assert recorder.flush() == FlushReport(0, 0, 0)  # nothing left
    found = tier.stats.get_many([f"/route/{k}" for k in range(4)], ACCESS)
    assert [s.count for s in found.values()] == [250] * 4
    assert sum(s.errors for s in found.values()) == 10
    assert tier.stats.get("/checkout", "BasketSize").max == 6


def test_close_flushes_and_a_closed_recorder_refuses_values(sync_tier: webtier.WebTier) -> None:
    tier = sync_tier
    recorder = tier.stats.recorder(flush_interval=3600)
    recorder.record("/", ACCESS, 0.25)
    assert recorder.close() == FlushReport(1, 0, 0)
    assert tier.stats.get("/", ACCESS).count == 1
    with pytest.raises(RuntimeError, match="closed"):
        recorder.record("/", ACCESS, 0.25)


def test_the_interval_and_max_pending_flush_on_their_own(sync_tier: webtier.WebTier) -> None:
    tier = sync_tier
    with tier.stats.recorder(flush_interval=0.05) as recorder:
        recorder.record("/tick", ACCESS, 0.1)
        wait_for(lambda: tier.stats.get("/tick", ACCESS).count == 1)
    with tier.stats.recorder(flush_interval=3600, max_pending=50) as recorder:
        for _ in range(50):
            recorder.record("/burst", ACCESS, 0.1)
        wait_for(lambda: tier.stats.get("/burst", ACCESS).count == 50)


def wait_for(condition: Any, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not flushed in time"
        time.sleep(0.02)


def test_inputs_are_checked_when_recorded(sync_tier: webtier.WebTier) -> None:
    tier = sync_tier
    with tier.stats.recorder(flush_interval=3600) as recorder:
        for context, stat_type, value in [
            ("", ACCESS, 1.0),
            ("/", "not a type", 1.0),
            ("/", ACCESS, -1.0),  # AccessTime is never negative
            ("/", DELTA, math.nan),
            ("/", DELTA, 1e16),
            ("/", DELTA, "1"),
            ("/", DELTA, True),
            (["/"], DELTA, 1.0),  # unhashable: refused all the same
            ("/", {DELTA}, 1.0),
        ]:
            with pytest.raises(webtier.InvalidInput):
                recorder.record(context, stat_type, value)
        assert recorder.flush() == FlushReport(0, 0, 0)


def test_a_flush_that_cannot_reach_redis_is_kept_for_the_next() -> None:
    with RedisServer.start() as server:
        policy = RetryPolicy(attempts=1, backoff=0.01, backoff_cap=0.01)
        client = server.client(socket_timeout=0.5)
        tier = webtier.WebTier(client, Config(prefix="kept", retry=policy))
        try:
            with tier.stats.recorder(flush_interval=3600) as recorder:
                server.kill()  # before any connection: the flush provably sends nothing
                recorder.record("/", ACCESS, 1.0)
                recorder.record("/", ACCESS, 3.0)
                assert recorder.flush() == FlushReport(0, 1, 0)
                recorder.record("/", ACCESS, 5.0, failed=True)  # meets the kept batch
                server.launch()
                assert recorder.flush() == FlushReport(1, 0, 0)
            summary = tier.stats.get("/", ACCESS)
            assert (summary.count, summary.sum, summary.min, summary.max) == (3, 9.0, 1.0, 5.0)
            assert (summary.stddev, summary.errors) == (2.0, 1)
        finally:
            client.close()
