"""``webtier worker``, ``webtier workers`` and ``webtier server``: the
processes that run beside the app."""

from __future__ import annotations

import sys
import time

import click

from webtier.cli.failures import CommandFailed, one_line
from webtier.cli.output import json_option, print_json, print_table, say_empty
from webtier.cli.shared import FiniteFloat, SharedOptions, pass_options
from webtier.cli.signals import stop_on_signals
from webtier.errors import WebtierError
from webtier.workers import ColdStop, Worker, jobs_named


@click.command()
@click.option("--job", "jobs", multiple=True, help="Run only this job (repeatable). Default: all.")
@click.option("--once", is_flag=True, help="Run every job once, then exit.")
@click.option(
    "--heartbeat", type=FiniteFloat(min=0.1, max=86_400), default=5.0, show_default=True,
    help="Seconds between liveness beats (0.1 to 86400).",
)  # fmt: skip
@pass_options
def worker(options: SharedOptions, jobs: tuple[str, ...], once: bool, heartbeat: float) -> None:
    """Run the maintenance jobs (counter cleanup...) until stopped."""
    try:
        chosen = jobs_named(jobs)
    except WebtierError as error:
        raise click.BadParameter(str(error), param_hint="--job") from error
    with options.tier(with_rows=True) as tier:
        runner = Worker(tier, chosen, heartbeat=heartbeat, once=once)
        click.echo(f"worker {runner.id}: {', '.join(j.name for j in chosen)}", err=True)
        try:
            with stop_on_signals(runner.request_stop, runner.request_force_stop):
                runner.run()
        except ColdStop:
            click.echo("stopped at once", err=True)
            sys.exit(1)
        if once and runner.failures:
            failed = "; ".join(
                f"{job}: {one_line(str(error), type(error).__name__)}"
                for job, error in runner.failures.items()
            )
            raise CommandFailed(f"worker --once: {failed}")


@click.command()
@json_option
@pass_options
def workers(options: SharedOptions, as_json: bool) -> None:
    """List the workers that are alive."""
    with options.tier() as tier:
        alive = tier.workers.alive()
    now = time.time()
    if as_json:
        print_json(
            {
                "workers": [
                    {
                        "id": info.id,
                        "host": info.host,
                        "pid": info.pid,
                        "jobs": list(info.jobs),
                        "started_epoch": info.started,
                        "last_beat_epoch": info.beat,
                        "last_beat_age_seconds": max(0.0, now - info.beat),
                    }
                    for info in alive
                ]
            }
        )
    elif not alive:
        say_empty("no workers alive")
    else:
        print_table(
            ("worker", "host", "pid", "jobs", "last beat (s ago)"),
            (
                (info.id, info.host, info.pid, ", ".join(info.jobs), f"{now - info.beat:.0f}")
                for info in alive
            ),
            right=("pid", "last beat (s ago)"),
        )
