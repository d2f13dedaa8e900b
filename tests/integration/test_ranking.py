"""The item view ranking's write path on real Redis: every target, both APIs."""

from __future__ import annotations

import json
from typing import Any

import pytest

import webtier
from tests.helpers.servers import ranking_scores
from webtier.errors import InvalidInput

pytestmark = pytest.mark.anyio


@pytest.mark.matrix
async def test_views_add_up_per_item(tier: Any, redis_url: str, config: Any) -> None:
    for item in ("42", "42", "7", "item:{x}/é"):
        await tier.ranking.record_view(item)
    client = webtier.connect(redis_url)
    try:
        scores = ranking_scores(client, tier.config)
    finally:
        webtier.disconnect(client)
    assert scores == {"42": 2.0, "7": 1.0, "item:{x}/é": 1.0}


async def test_a_bad_item_is_refused_before_anything_is_sent(tier: Any) -> None:
    for bad in ("", "a\nb", 42):
        with pytest.raises(InvalidInput):
            await tier.ranking.record_view(bad)


@pytest.mark.matrix
async def test_top_and_rank_order_items_by_views(tier: Any) -> None:
    for item, views in (("a", 3), ("b", 5), ("c", 1)):
        for _ in range(views):
            await tier.ranking.record_view(item)
    assert await tier.ranking.top(2) == [("b", 5.0), ("a", 3.0)]
    assert await tier.ranking.top(0) == []
    assert [await tier.ranking.rank(i) for i in ("b", "a", "c", "never")] == [0, 1, 2, None]
    with pytest.raises(InvalidInput):
        await tier.ranking.top(-1)


def test_the_command_line_reads_the_ranking(redis_url: str, prefix: str) -> None:
    from click.testing import CliRunner

    from webtier.cli import main

    client = webtier.connect(redis_url)
    tier = webtier.WebTier(client, webtier.Config(prefix=prefix))
    for item in ("a", "b", "b"):
        tier.ranking.record_view(item)
    webtier.disconnect(client)

    def run(*args: str, code: int = 0) -> str:
        result = CliRunner().invoke(main, ["--url", redis_url, "--prefix", prefix, *args])
        assert result.exit_code == code, result.output
        return result.output

    assert json.loads(run("ranking", "top", "-n", "5", "--json"))["items"] == [
        {"place": 0, "item": "b", "views": 2.0},
        {"place": 1, "item": "a", "views": 1.0},
    ]
    assert run("ranking", "top", "-n", "5").split()[-6:] == ["0", "2.00", "b", "1", "1.00", "a"]
    assert json.loads(run("ranking", "rank", "a", "--json")) == {"item": "a", "place": 1}
    assert "not ranked" in run("ranking", "rank", "z", code=1)
    result = CliRunner().invoke(main, ["--url", redis_url, "ranking", "top", "-n", "-1"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
