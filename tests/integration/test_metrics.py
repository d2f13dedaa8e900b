"""The Prometheus / OpenMetrics exposition on a real server: valid by
prometheus_client's own parsers, the histogram's buckets consistent with
the statistics, a scrape's round trips fixed whatever the number of
counters, ``webtier_up 0`` without Redis."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

import webtier
from webtier import metrics
from webtier.config import ACCESS_TIME
from webtier.workers import Worker

pytestmark = pytest.mark.needs_redis


@pytest.fixture
def tier(redis_url: str, config: webtier.Config) -> Iterator[webtier.WebTier]:
    client = webtier.connect(redis_url)
    yield webtier.WebTier(client, config)
    webtier.disconnect(client)


def some_data(tier: webtier.WebTier, counters: int = 3) -> None:
    for n in range(counters):
        tier.counters.record(f"views:/{n}", n + 1)
    for name in ("pagecache:hit", "pagecache:hit", "pagecache:miss", "pagecache:render"):
        tier.counters.record(name)
    for value in (0.001, 0.01, 0.01, 0.2, 3.0):
        tier.stats.record("/item/{id}", ACCESS_TIME, value)
    tier.stats.record("/", ACCESS_TIME, 0.005, failed=True)
    tier.sessions.new()
    tier.ranking.record_view("item1")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in parse_text(text)
        for s in family.samples
    }


@pytest.fixture
def worker(tier: webtier.WebTier) -> Iterator[Worker]:
    running = Worker(tier, (), heartbeat=0.2)
    thread = threading.Thread(target=running.run)
    thread.start()
    yield running
    running.request_stop()
    thread.join(10)


@pytest.mark.usefixtures("steady_hour")
def test_the_exposition_parses_and_says_what_redis_holds(
    tier: webtier.WebTier, worker: Worker
) -> None:
    some_data(tier)
    registry = CollectorRegistry()
    registry.register(metrics.Collector(tier))
    text = generate_latest(registry).decode()
    found = samples(text)
    assert found[("webtier_up", ())] == 1
    assert found[("webtier_counts_total", (("counter", "views:/2"),))] == 3
    assert found[("webtier_pagecache_requests_total", (("outcome", "hit"),))] == 2
    assert found[("webtier_pagecache_renders_total", ())] == 1
    assert found[("webtier_sessions", ())] == 1
    assert found[("webtier_item_views", (("item", "item1"),))] == 1
    assert found[("webtier_workers_alive", ())] >= 1
    item = (("context", "/item/{id}"),)
    assert found[("webtier_access_time_seconds_bucket", (*item, ("le", "+Inf")))] == 5
    # Power-of-two bounds are exact bucket boundaries: the counts below are exact.
    assert found[("webtier_access_time_seconds_bucket", (*item, ("le", "0.015625")))] == 3
    assert found[("webtier_access_time_seconds_bucket", (*item, ("le", "4.0")))] == 5
    assert found[("webtier_access_time_seconds_sum", item)] == pytest.approx(3.221)
    assert found[("webtier_access_time_seconds_count", item)] == 5
    median = found[("webtier_access_time_percentile_seconds", (*item, ("percentile", "50")))]
    assert median == pytest.approx(0.01, rel=0.03)
    # The same through the OpenMetrics encoder and parser.
    body, content_type = metrics.exposition_of(
        tier.transport.run(metrics.read_snapshot(tier.config, metrics.Settings())),
        "application/openmetrics-text; version=1.0.0",
    )
    assert content_type.startswith("application/openmetrics-text")
    families = {f.name: f for f in parse_om(body.decode())}
    assert families["webtier_access_time_seconds"].type == "histogram"
    assert families["webtier_counts"].type == "counter"


@pytest.mark.usefixtures("steady_hour")
def test_buckets_are_cumulative_and_end_at_the_count(tier: webtier.WebTier) -> None:
    some_data(tier)
    snapshot = tier.transport.run(metrics.read_snapshot(tier.config, metrics.Settings()))
    for family in metrics.families(snapshot):
        if family.type != "histogram":
            continue
        by_context: dict[str, list[float]] = {}
        for s in family.samples:
            if s.name.endswith("_bucket"):
                by_context.setdefault(s.labels["context"], []).append(s.value)
        for counts in by_context.values():
            assert counts == sorted(counts)


def counting(tier: webtier.WebTier) -> list[Any]:
    steps: list[Any] = []
    exchange = tier.transport.exchange

    def counted(step: Any, budget: Any = None) -> Any:
        steps.append(step)
        return exchange(step, budget)

    tier.transport.exchange = counted  # type: ignore[method-assign]
    return steps


def test_a_scrape_costs_the_same_round_trips_for_10_or_1000_counters(
    tier: webtier.WebTier,
) -> None:
    # Unmarked: one server, where one exchange is one round trip.
    costs = []
    for counters in (10, 1000):
        some_data(tier, counters)
        steps = counting(tier)
        settings = metrics.Settings(max_counters=2000)
        text = metrics.exposition_of(
            tier.transport.run(metrics.read_snapshot(tier.config, settings))
        )[0].decode()
        assert f'counter="views:/{counters - 1}"' in text
        costs.append(len(steps))
        del tier.transport.exchange
    print("round trips per scrape:", costs)
    assert costs[0] == costs[1] <= 12, costs


def test_without_redis_the_collector_says_down() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = webtier.connect(f"redis://127.0.0.1:{port}/0")
    config = webtier.Config(retry=webtier.config.RetryPolicy(attempts=1, time_limit=1.0))
    try:
        registry = CollectorRegistry()
        registry.register(metrics.Collector(webtier.WebTier(client, config)))
        found = samples(generate_latest(registry).decode())
    finally:
        webtier.disconnect(client)
    assert found == {("webtier_up", ()): 0.0}


@pytest.mark.anyio
async def test_the_asgi_app_serves_both_formats(redis_url: str, config: webtier.Config) -> None:
    import httpx

    client = webtier.connect_async(redis_url)
    try:
        app = metrics.asgi_app(webtier.AsyncWebTier(client, config))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://m") as http:
            plain = await http.get("/")
            assert plain.headers["content-type"].startswith("text/plain")
            assert samples(plain.text)[("webtier_up", ())] == 1
            om = await http.get("/", headers={"Accept": "application/openmetrics-text"})
            assert om.text.endswith("# EOF\n")
            list(parse_om(om.text))
    finally:
        await client.aclose()


@pytest.mark.anyio
async def test_a_shop_mounts_it_as_a_route(redis_url: str, config: webtier.Config) -> None:
    import httpx
    from starlette.applications import Starlette
    from starlette.routing import Route

    client = webtier.connect_async(redis_url)
    try:
        app = Starlette(
            routes=[Route("/metrics", metrics.asgi_app(webtier.AsyncWebTier(client, config)))]
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop") as http:
            response = await http.get("/metrics")
        assert response.status_code == 200
        assert samples(response.text)[("webtier_up", ())] == 1
    finally:
        await client.aclose()


PROMTOOL = shutil.which("promtool")
# promtool reads the classic text format only: an OpenMetrics counter (a
# family ``x`` of TYPE counter whose sample is ``x_total``) is to it an
# untyped ``x_total`` without help. That complaint alone is the parser's.
OM_COUNTER = re.compile(r"(\w+)_total no help text")


def promtool(text: str) -> list[str]:
    """promtool check metrics' complaints about ``text`` (none: it passes)."""
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    complaints = [line.strip() for line in (done.stdout + done.stderr).splitlines()]
    assert (done.returncode == 0) == (not any(complaints)), (done.returncode, complaints)
    return [line for line in complaints if line]


@pytest.mark.skipif(PROMTOOL is None, reason="no promtool (Debian's prometheus package)")
@pytest.mark.usefixtures("steady_hour")
def test_promtool_passes_both_formats_holding_the_same_series(
    tier: webtier.WebTier, worker: Worker
) -> None:
    some_data(tier)
    snapshot = tier.transport.run(metrics.read_snapshot(tier.config, metrics.Settings()))
    classic = metrics.exposition_of(snapshot)[0].decode()
    om = metrics.exposition_of(snapshot, "application/openmetrics-text")[0].decode()
    assert promtool(classic) == []
    for complaint in promtool(om):
        family = OM_COUNTER.fullmatch(complaint)
        assert family is not None, complaint
        assert f"# TYPE {family.group(1)} counter\n" in om, complaint
    om_samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in parse_om(om)
        for s in family.samples
    }
    assert om_samples == samples(classic)
    assert ("webtier_access_time_seconds_count", (("context", "/item/{id}"),)) in om_samples
