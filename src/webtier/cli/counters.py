"""``webtier counters``: read the time-series counters."""

from __future__ import annotations

import time

import click

from webtier.cli.shared import SharedOptions, pass_options


@click.group()
def counters() -> None:
    """Read the time-series counters."""


@counters.command("list")
@click.argument("prefix", required=False)
@pass_options
def counters_list(options: SharedOptions, prefix: str | None) -> None:
    """Names of the counters with data, optionally only those starting with PREFIX."""
    with options.tier() as tier:
        for name in tier.counters.names(prefix):
            click.echo(name)


@counters.command("show")
@click.argument("name")
@click.option(
    "--precision", type=int, default=60, show_default=True, help="Slice length in seconds."
)
@pass_options
def counters_show(options: SharedOptions, name: str, precision: int) -> None:
    """Samples of counter NAME at one precision, oldest first."""
    with options.tier() as tier:
        for start, count in tier.counters.get(name, precision):
            click.echo(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(start))}  {count}")
