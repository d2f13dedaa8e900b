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
    _title, headers, _rule, figures = out.splitlines()
    assert headers.split()[4:8] == ["count", "errors", "mean", "(s)"]
    assert figures.split()[2:8] == ["3", "0", "0.2", "0.1", "0.1", "0.3"]
    code, out = run(*edge, "stats", "show", "/item/{id}", "--each", "--periods", "2")
    assert code == 0, out
    assert [line.split()[2] for line in out.splitlines()[3:]] == ["0", "3"]

    code, out = run(*edge, "stats", "slowest", "-n", "5")
    assert code == 0, out
    assert out.splitlines()[0].split() == ["context", "mean", "(s)"]
    assert [line.split()[0] for line in out.splitlines()[2:]] == ["/item/{id}", "/"]


def test_bad_arguments_are_clean_errors(redis_url: str, prefix: str) -> None:
    edge = ("--url", redis_url, "--prefix", prefix)
    code, out = run(*edge, "stats", "show", "/", "--type", "a:b")
    assert code == 1
    assert "type" in out
    assert "Traceback" not in out
    code, out = run(*edge, "stats", "--period", "7", "slowest")
    assert code == 2
    assert "period" in out
