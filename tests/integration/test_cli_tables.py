"""Read commands for people: tables with headers and units; an empty result
said in words; a missing name is exit status 1 with a message."""

from __future__ import annotations

import pytest

import webtier
from tests.helpers.cli import webtier_cli

pytestmark = [pytest.mark.onlynoncluster, pytest.mark.usefixtures("steady_hour")]


def header_and_rows(stdout: str) -> tuple[list[str], list[list[str]]]:
    """A table's header line (split at runs of 2+ spaces) and its rows."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    rule = next(i for i, line in enumerate(lines) if set(line.strip()) <= {"─", "-", " "})
    split = [[cell for cell in line.strip().split("  ") if cell] for line in lines]
    return [cell.strip() for cell in split[rule - 1]], [
        [cell.strip() for cell in row] for row in split[rule + 1 :]
    ]


def test_tables_have_headers_with_units(redis_url: str, prefix: str) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, webtier.Config(prefix=prefix))
    tier.stats.record("/", "AccessTime", 0.25)
    for item in ("item:1", "item:2", "item:2"):
        tier.ranking.record_view(item)
    tier.counters.record("hits", 3)
    webtier.disconnect(client)
    edge = ("--url", redis_url, "--prefix", prefix)

    headers, rows = header_and_rows(webtier_cli(*edge, "stats", "show", "/").stdout)
    assert headers[:5] == ["period start (local time)", "count", "errors", "mean (s)", "stddev (s)"]
    assert "p99 (s)" in headers
    assert rows[0][1:4] == ["1", "0", "0.25"]

    headers, rows = header_and_rows(webtier_cli(*edge, "stats", "slowest").stdout)
    assert (headers, rows) == (["context", "mean (s)"], [["/", "0.25"]])

    headers, rows = header_and_rows(webtier_cli(*edge, "ranking", "top").stdout)
    assert headers == ["place", "views (rescaled)", "item"]
    assert [row[2] for row in rows] == ["item:2", "item:1"]

    headers, rows = header_and_rows(webtier_cli(*edge, "counters", "show", "hits").stdout)
    assert headers == ["slice start (local time)", "count"]
    assert rows[0][1] == "3"


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (("counters", "list"), "no counters\n"),
        (("counters", "list", "page:"), "no counter names start with 'page:'\n"),
        (("stats", "slowest"), "no access times recorded in the last 1 period(s)\n"),
        (("ranking", "top"), "no items ranked\n"),
        (("sessions", "stats"), "0 sessions (in 64 shards)\n"),
        (("workers",), "no workers alive\n"),
    ],
)
def test_an_empty_result_says_so(
    redis_url: str, prefix: str, command: tuple[str, ...], said: str
) -> None:
    ran = webtier_cli("--url", redis_url, "--prefix", prefix, *command)
    assert (ran.code, ran.stdout) == (0, said)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (("counters", "show", "nosuch"), "no counter named 'nosuch'"),
        (("stats", "show", "/nosuch"), "no AccessTime recorded for context '/nosuch'"),
        (("ranking", "rank", "nosuch"), "item 'nosuch' is not ranked"),
        (("sessions", "user", "nosuch"), "user 'nosuch' has no live session"),
    ],
)
def test_a_missing_name_is_exit_status_1(
    redis_url: str, prefix: str, command: tuple[str, ...], said: str
) -> None:
    ran = webtier_cli("--url", redis_url, "--prefix", prefix, *command)
    assert ran.code == 1
    assert ran.stdout == ""
    assert said in ran.stderr
    assert len(ran.stderr.splitlines()) == 1
