"""``webtier stats``: reading statistics from the command line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import webtier
from webtier.cli import main

pytestmark = pytest.mark.usefixtures("steady_hour")


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_stats_show_and_slowest(redis_url: str, prefix: str) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, webtier.Config(prefix=prefix))
    for value in (0.1, 0.2, 0.3):
        tier.stats.record("/item/{id}", "AccessTime", value)
    tier.stats.record("/", "AccessTime", 0.01, failed=True)
    webtier.disconnect(client)
    edge = ("--url", redis_url, "--prefix", prefix)

    code, out = run(*edge, "stats", "show", "/item/{id}")
    assert code == 0, out
    assert "count 3  errors 0  mean 0.2 " in out
    assert "min 0.1  max 0.3" in out
    code, out = run(*edge, "stats", "show", "/item/{id}", "--each", "--periods", "2")
    assert code == 0, out
    assert [line.split("  ")[1] for line in out.splitlines()] == ["count 0", "count 3"]

    code, out = run(*edge, "stats", "slowest", "-n", "5")
    assert code == 0, out
    assert [line.split()[-1] for line in out.splitlines()] == ["/item/{id}", "/"]


def test_bad_arguments_are_clean_errors(redis_url: str, prefix: str) -> None:
    edge = ("--url", redis_url, "--prefix", prefix)
    code, out = run(*edge, "stats", "show", "/", "--type", "a:b")
    assert code == 1
    assert "type" in out
    assert "Traceback" not in out
    code, out = run(*edge, "stats", "--period", "7", "slowest")
    assert code == 2
    assert "period" in out
