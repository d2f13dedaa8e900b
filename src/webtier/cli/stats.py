"""``webtier stats``: read the statistics (access times and others)."""

from __future__ import annotations

import time

import click

from webtier.cli.shared import SharedOptions, pass_options, with_app_settings
from webtier.config import ACCESS_TIME, StatsSettings
from webtier.errors import WebtierError


@click.group()
@click.option(
    "--period", default=3600, show_default=True, help="Seconds per record, as the app set it."
)
@click.option("--shards", default=64, show_default=True, help="Shards, as the app set them.")
@click.pass_context
def stats(ctx: click.Context, period: int, shards: int) -> None:
    """Read the statistics (access times and others)."""
    try:
        settings = StatsSettings(period=period, shards=shards)
    except WebtierError as error:
        raise click.BadParameter(str(error)) from error
    with_app_settings(ctx, stats=settings)


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


@stats.command("show")
@click.argument("context")
@click.option("--type", "stat_type", default=ACCESS_TIME, show_default=True)
@click.option("--periods", default=1, show_default=True, help="Newest periods to merge.")
@click.option("--each", is_flag=True, help="One line per period instead of merged.")
@pass_options
def stats_show(
    options: SharedOptions, context: str, stat_type: str, periods: int, each: bool
) -> None:
    """Count, mean, spread, extremes and percentiles of one CONTEXT."""
    with options.tier() as tier:
        if each:
            summaries = tier.stats.series(context, stat_type, periods)
        else:
            summaries = [tier.stats.get(context, stat_type, periods)]
    for s in summaries:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.start))
        percentiles = "  ".join(f"p{p} {_figure(s.percentile(p))}" for p in (50, 90, 95, 99))
        click.echo(
            f"{started}  count {s.count}  errors {s.errors}  mean {_figure(s.mean)}  "
            f"stddev {_figure(s.stddev)}  min {_figure(s.min)}  max {_figure(s.max)}  "
            f"{percentiles}"
        )


@stats.command("slowest")
@click.option("-n", "count", default=20, show_default=True, help="How many contexts.")
@click.option("--periods", default=1, show_default=True, help="Newest periods to merge.")
@click.option("--by", default="mean", show_default=True, help="mean, max, or p50, p95, p99...")
@pass_options
def stats_slowest(options: SharedOptions, count: int, periods: int, by: str) -> None:
    """The slowest contexts by access time, slowest first."""
    with options.tier() as tier:
        ranked = tier.stats.slowest(count, periods=periods, by=by)
    for context, score in ranked:
        click.echo(f"{score:12.6f}  {context}")
