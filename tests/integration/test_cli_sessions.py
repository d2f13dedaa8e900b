"""``webtier sessions``: the session store from the command line."""

from __future__ import annotations

from click.testing import CliRunner

import webtier
from webtier.cli import main


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_sessions_stats_user_and_clean(redis_url: str, prefix: str) -> None:
    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, webtier.Config(prefix=prefix))
    tokens = [tier.sessions.new(user="alice" if n < 2 else None) for n in range(5)]
    edge = ("--url", redis_url, "--prefix", prefix)
    try:
        code, out = run(*edge, "sessions", "stats")
        assert code == 0, out
        assert out.splitlines()[2].split() == ["sessions", "5"]

        code, out = run(*edge, "sessions", "user", "alice")
        assert code == 0, out
        assert len(out.splitlines()) == 3 + 2  # title, headers, rule, two sessions

        code, out = run(*edge, "sessions", "clean", "--keep", "3", "--yes")
        assert code == 0, out
        assert out.startswith("2 removed, 0 spared")
        assert [tier.sessions.info(t) is not None for t in tokens].count(True) == 3

        code, out = run(*edge, "sessions", "user", "alice", "--revoke-all", "--yes")
        assert code == 0, out
        assert tier.sessions.of_user("alice") == []

        code, out = run(*edge, "sessions", "--shards", "0", "stats")
        assert code == 2
        assert "shards" in out
    finally:
        webtier.disconnect(client)
