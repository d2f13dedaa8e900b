"""``webtier stats``: read the statistics (access times and others)."""

from __future__ import annotations

import click

from webtier.cli.output import (
    figure,
    json_option,
    local_time,
    not_found,
    print_json,
    print_table,
    say_empty,
)
from webtier.cli.shared import SharedOptions, pass_options, with_app_settings
from webtier.config import ACCESS_TIME, StatsSettings
from webtier.errors import WebtierError
from webtier.types import Summary


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


PERCENTILES = (50, 90, 95, 99)


def _summary_document(summary: Summary) -> dict[str, object]:
    return {
        "start_epoch": summary.start,
        "periods": summary.periods,
        "count": summary.count,
        "errors": summary.errors,
        "mean_seconds": summary.mean,
        "stddev_seconds": summary.stddev,
        "min_seconds": summary.min,
        "max_seconds": summary.max,
        **{f"p{p}_seconds": summary.percentile(p) for p in PERCENTILES},
    }


def _summary_row(summary: Summary) -> tuple[object, ...]:
    figures = (summary.mean, summary.stddev, summary.min, summary.max)
    percentiles = (summary.percentile(p) for p in PERCENTILES)
    return (
        local_time(summary.start),
        summary.count,
        summary.errors,
        *(figure(value) for value in (*figures, *percentiles)),
    )


SUMMARY_HEADERS = (
    "period start (local time)",
    "count",
    "errors",
    "mean (s)",
    "stddev (s)",
    "min (s)",
    "max (s)",
    *(f"p{p} (s)" for p in PERCENTILES),
)


@stats.command("show")
@click.argument("context")
@click.option(
    "--type", "stat_type", default=ACCESS_TIME, show_default=True,
    help="Statistic to read; its values are shown as seconds.",
)  # fmt: skip
@click.option("--periods", default=1, show_default=True, help="Newest periods to merge.")
@click.option("--each", is_flag=True, help="One line per period instead of merged.")
@json_option
@pass_options
def stats_show(
    options: SharedOptions, context: str, stat_type: str, periods: int, each: bool, as_json: bool
) -> None:
    """Count, mean, spread, extremes and percentiles of one CONTEXT (exit
    status 1 if nothing was recorded for it in those periods)."""
    with options.tier(lag_tolerated=True) as tier:
        if each:
            summaries = tier.stats.series(context, stat_type, periods)
        else:
            summaries = [tier.stats.get(context, stat_type, periods)]
    recorded = any(s.count for s in summaries)
    if as_json:
        print_json(
            {
                "context": context,
                "type": stat_type,
                "summaries": [_summary_document(s) for s in summaries],
            }
        )
    elif recorded:
        print_table(
            SUMMARY_HEADERS,
            (_summary_row(s) for s in summaries),
            title=f"{stat_type} of {context}",
            right=SUMMARY_HEADERS[1:],
        )
    if not recorded:
        raise not_found(
            f"no {stat_type} recorded for context {context!r} in the last {periods} period(s)"
        )


@stats.command("slowest")
@click.option("-n", "count", default=20, show_default=True, help="How many contexts.")
@click.option("--periods", default=1, show_default=True, help="Newest periods to merge.")
@click.option("--by", default="mean", show_default=True, help="mean, max, or p50, p95, p99...")
@json_option
@pass_options
def stats_slowest(options: SharedOptions, count: int, periods: int, by: str, as_json: bool) -> None:
    """The slowest contexts by access time, slowest first."""
    with options.tier(lag_tolerated=True) as tier:
        ranked = tier.stats.slowest(count, periods=periods, by=by)
    if as_json:
        print_json(
            {
                "by": by,
                "periods": periods,
                "contexts": [
                    {"context": context, "score_seconds": seconds} for context, seconds in ranked
                ],
            }
        )
    elif not ranked:
        say_empty(f"no access times recorded in the last {periods} period(s)")
    else:
        print_table(
            ("context", f"{by} (s)"),
            ((context, figure(seconds)) for context, seconds in ranked),
            right=(f"{by} (s)",),
        )
