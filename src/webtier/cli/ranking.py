"""``webtier ranking``: read the item view ranking."""

from __future__ import annotations

import click

from webtier.cli.output import json_option, not_found, print_json, print_table, say_empty
from webtier.cli.shared import SharedOptions, pass_options


@click.group()
def ranking() -> None:
    """Read the item view ranking."""


@ranking.command("top")
@click.option("-n", "count", default=20, show_default=True, help="How many items.")
@json_option
@pass_options
def ranking_top(options: SharedOptions, count: int, as_json: bool) -> None:
    """The most viewed items with their (rescaled) view counts, most viewed first."""
    with options.tier(lag_tolerated=True) as tier:
        ranked = tier.ranking.top(count)
    if as_json:
        print_json(
            {
                "items": [
                    {"place": place, "item": item, "views": views}
                    for place, (item, views) in enumerate(ranked)
                ]
            }
        )
    elif not ranked:
        say_empty("no items ranked")
    else:
        print_table(
            ("place", "views (rescaled)", "item"),
            ((place, f"{views:.2f}", item) for place, (item, views) in enumerate(ranked)),
            right=("place", "views (rescaled)"),
        )


@ranking.command("rank")
@click.argument("item")
@json_option
@pass_options
def ranking_rank(options: SharedOptions, item: str, as_json: bool) -> None:
    """ITEM's place in the ranking (0 = most viewed); exit status 1 if it is
    not ranked."""
    with options.tier(lag_tolerated=True) as tier:
        place = tier.ranking.rank(item)
    if as_json:
        print_json({"item": item, "place": place})
    elif place is not None:
        click.echo(f"{item}: place {place} (0 = most viewed)")
    if place is None:
        raise not_found(f"item {item!r} is not ranked")
