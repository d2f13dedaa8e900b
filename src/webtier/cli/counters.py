"""``webtier counters``: read the time-series counters."""

from __future__ import annotations

import click

from webtier.cli.output import (
    json_option,
    local_time,
    not_found,
    print_json,
    print_table,
    say_empty,
)
from webtier.cli.progress import progress
from webtier.cli.shared import SharedOptions, pass_options


@click.group()
def counters() -> None:
    """Read the time-series counters."""


@counters.command("list")
@click.argument("prefix", required=False)
@json_option
@pass_options
def counters_list(options: SharedOptions, prefix: str | None, as_json: bool) -> None:
    """Names of the counters with data, optionally only those starting with PREFIX."""
    with options.tier(lag_tolerated=True) as tier:
        names = list(tier.counters.names(prefix))
    if as_json:
        print_json({"prefix": prefix, "counters": names})
    elif not names:
        say_empty("no counters" if prefix is None else f"no counter names start with {prefix!r}")
    else:
        for name in names:
            click.echo(name)


@counters.command("show")
@click.argument("name")
@click.option(
    "--precision", type=int, default=60, show_default=True, help="Slice length in seconds."
)
@json_option
@pass_options
def counters_show(options: SharedOptions, name: str, precision: int, as_json: bool) -> None:
    """Samples of counter NAME at one precision, oldest first (exit status 1
    if there is no counter NAME)."""
    with options.tier(lag_tolerated=True) as tier:
        samples = list(tier.counters.get(name, precision))
        known = bool(samples) or name in tier.counters.names(name)
    if as_json:
        print_json(
            {
                "counter": name,
                "precision_seconds": precision,
                "samples": [{"start_epoch": start, "count": count} for start, count in samples],
            }
        )
    elif samples:
        print_table(
            ("slice start (local time)", "count"),
            ((local_time(start), count) for start, count in samples),
            title=f"{name}, per {precision} s",
            right=("count",),
        )
    elif known:
        say_empty(f"counter {name!r} has no samples at a precision of {precision} s")
    if not known:
        raise not_found(f"no counter named {name!r}")


@counters.command("clean")
@pass_options
def counters_clean(options: SharedOptions) -> None:
    """One cleanup pass, as the worker's (every precision): drop samples
    older than each precision keeps, and unlist counters left empty."""
    with options.tier() as tier:
        listed = len(tier.counters.names())
        # One library call: the bar shows the pass running, then its rate.
        with progress("cleaning counters", listed or None, "counters") as advance:
            report = tier.counters.clean()
            advance(report.counters)
    click.echo(
        f"{report.counters} counters, {report.samples_dropped} samples dropped, "
        f"{report.counters_unlisted} unlisted, in {report.seconds:.3f} s"
    )
