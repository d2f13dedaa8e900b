"""``webtier ranking``: read the item view ranking."""

from __future__ import annotations

import click

from webtier.cli.shared import SharedOptions, pass_options


@click.group()
def ranking() -> None:
    """Read the item view ranking."""


@ranking.command("top")
@click.option("-n", "count", default=20, show_default=True, help="How many items.")
@pass_options
def ranking_top(options: SharedOptions, count: int) -> None:
    """The most viewed items with their (rescaled) view counts, most viewed first."""
    with options.tier() as tier:
        ranked = tier.ranking.top(count)
    for place, (item, views) in enumerate(ranked):
        click.echo(f"{place:6d}  {views:12.2f}  {item}")


@ranking.command("rank")
@click.argument("item")
@pass_options
def ranking_rank(options: SharedOptions, item: str) -> None:
    """ITEM's place in the ranking (0 = most viewed), or "not ranked"."""
    with options.tier() as tier:
        place = tier.ranking.rank(item)
    click.echo("not ranked" if place is None else str(place))
