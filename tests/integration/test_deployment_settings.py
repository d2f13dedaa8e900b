"""The deployment's settings: stored by the first writer, checked by the rest
(library, workers, CLI), on every target; concurrent first writers agree."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

import webtier
from webtier.cli import main
from webtier.config import Config, SessionSettings, StatsSettings
from webtier.errors import SettingsMismatch
from webtier.workers import AsyncWorker, Worker

pytestmark = pytest.mark.anyio


def with_shards(prefix: str, shards: int) -> Config:
    return Config(prefix=prefix, sessions=SessionSettings(shards=shards))


def run(*args: str, given: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), input=given, catch_exceptions=False)
    return result.exit_code, result.output


async def test_the_first_writer_stores_and_the_rest_must_agree(
    tier_factory: Any, prefix: str
) -> None:
    first = tier_factory(with_shards(prefix, 16))
    assert await first.deployment.stored() is None
    stored = await first.deployment.check()
    assert stored.values["sessions.shards"] == 16
    assert await first.deployment.check() == stored  # again: nothing changes

    same = tier_factory(with_shards(prefix, 16))
    assert await same.deployment.check() == stored

    other = tier_factory(with_shards(prefix, 7))
    with pytest.raises(SettingsMismatch) as refused:
        await other.deployment.check()
    assert refused.value.differences == (("sessions.shards", 7, 16),)
    assert "sessions.shards is 7 here, 16 in Redis" in str(refused.value)
    assert await other.deployment.stored() == stored  # the refused one stored nothing

    # A deliberate change, then back to none stored.
    assert (await other.deployment.adopt()).values["sessions.shards"] == 7
    with pytest.raises(SettingsMismatch, match=r"16 here, 7 in Redis"):
        await first.deployment.check()
    assert await other.deployment.reset() is True
    assert await other.deployment.stored() is None


def race_to_store(tiers: list[webtier.WebTier]) -> list[object]:
    """Each tier's check at the same instant, on threads: its stored shard
    count, or the SettingsMismatch it raised."""
    start = threading.Barrier(len(tiers))
    outcomes: list[object] = [None] * len(tiers)

    def first_write(n: int) -> None:
        start.wait()
        try:
            outcomes[n] = tiers[n].deployment.check().values["sessions.shards"]
        except SettingsMismatch as error:
            outcomes[n] = error

    threads = [threading.Thread(target=first_write, args=(n,)) for n in range(len(tiers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


def test_of_concurrent_first_writers_exactly_one_wins(redis_url: str) -> None:
    clients = [webtier.connect(redis_url) for _ in range(4)]
    try:
        for _ in range(10):
            prefix = f"t{uuid.uuid4().hex[:12]}"
            tiers = [webtier.WebTier(c, with_shards(prefix, 8 + n)) for n, c in enumerate(clients)]
            outcomes = race_to_store(tiers)
            winners = [n for n, outcome in enumerate(outcomes) if isinstance(outcome, int)]
            assert len(winners) == 1, outcomes
            (winner,) = winners
            assert outcomes[winner] == 8 + winner
            for n, outcome in enumerate(outcomes):
                if n != winner:
                    assert isinstance(outcome, SettingsMismatch)
                    assert outcome.differences == (("sessions.shards", 8 + n, 8 + winner),)
    finally:
        for client in clients:
            webtier.disconnect(client)


async def test_a_worker_stores_first_and_refuses_other_settings(
    tier_factory: Any, api: str, prefix: str
) -> None:
    worker_tier = tier_factory(with_shards(prefix, 16))

    async def run_worker(tier: Any) -> None:
        if api == "sync":
            worker = Worker(tier._wrapped, once=True, heartbeat=0.1)
            await anyio.to_thread.run_sync(worker.run)
        else:
            await AsyncWorker(tier, once=True, heartbeat=0.1).run()

    await run_worker(worker_tier)  # the first writer
    assert (await worker_tier.deployment.stored()).values["sessions.shards"] == 16

    other = tier_factory(Config(prefix=prefix, stats=StatsSettings(period=60)))
    with pytest.raises(SettingsMismatch, match=r"stats\.period is 60 here, 3600 in Redis"):
        await run_worker(other)
    assert await other.workers.alive() == []  # it never beat: no job ran


def test_cli_refuses_a_shard_count_the_deployment_contradicts(redis_url: str, prefix: str) -> None:
    client = webtier.connect(redis_url)
    try:
        app = webtier.WebTier(client, with_shards(prefix, 16))
        app.deployment.check()  # the app, at startup
        for _ in range(6):
            app.sessions.new()
        edge = ("--url", redis_url, "--prefix", prefix)

        code, out = run(*edge, "sessions", "--shards", "7", "stats")
        assert code == 1
        assert out.count("\n") == 1, out
        assert "sessions.shards is 7 here, 16 in Redis" in out
        assert "Traceback" not in out

        code, out = run(*edge, "sessions", "stats", "--json")  # follows the deployment's 16
        assert code == 0, out
        assert json.loads(out)["sessions"] == 6
        code, out = run(*edge, "sessions", "--shards", "16", "stats", "--json")
        assert code == 0, out
        assert json.loads(out)["sessions"] == 6

        code, out = run(*edge, "worker", "--once")  # a worker follows them too
        assert code == 0, out
        code, out = run(*edge, "stats", "--period", "60", "slowest")
        assert code == 1
        assert "stats.period is 60 here, 3600 in Redis" in out
    finally:
        webtier.disconnect(client)


def test_cli_settings_show_adopt_and_reset(redis_url: str, prefix: str) -> None:
    edge = ("--url", redis_url, "--prefix", prefix)
    code, out = run(*edge, "settings", "show")
    assert code == 0
    assert out.startswith("no settings stored")

    client = webtier.connect(redis_url)
    try:
        webtier.WebTier(client, with_shards(prefix, 16)).deployment.check()
        code, out = run(*edge, "settings", "show", "--json")
        assert code == 0
        document = json.loads(out)
        assert document["stored"] is True
        assert document["version"] == 1
        assert document["settings"]["sessions.shards"] == 16

        code, out = run(*edge, "settings", "adopt", "--set", "sessions.shards=7", given="n\n")
        assert code == 1
        assert "sessions.shards: 16 -> 7" in out
        assert "16" in run(*edge, "settings", "show")[1]  # not changed

        code, out = run(*edge, "settings", "adopt", "--set", "sessions.shards=0", "--yes")
        assert code == 2
        assert "shards must be" in out
        code, out = run(*edge, "settings", "adopt", "--set", "sessions.shards=7", "--yes")
        assert code == 0, out
        code, out = run(*edge, "sessions", "--shards", "7", "stats")
        assert code == 0, out
        with pytest.raises(SettingsMismatch):  # the app's settings are now refused
            webtier.WebTier(client, with_shards(prefix, 16)).deployment.check()

        client.set(f"{prefix}:{{meta}}:settings", "not json")
        code, out = run(*edge, "sessions", "stats")
        assert code == 1
        assert "cannot be read" in out
        assert "settings reset" in out
        code, out = run(*edge, "settings", "reset", "--yes")
        assert (code, out) == (0, "removed\n")
        code, out = run(*edge, "sessions", "--shards", "7", "stats")  # none stored: as given
        assert code == 0, out
        assert run(*edge, "settings", "show")[1].startswith(
            "no settings stored"
        )  # reads store none
    finally:
        webtier.disconnect(client)
