"""``webtier worker``, ``webtier workers`` and ``webtier server``: the
processes that run beside the app."""

from __future__ import annotations

import contextlib
import sys
import threading
import time

import click

from webtier.cli.shared import FiniteFloat, SharedOptions, pass_options
from webtier.cli.signals import stop_on_signals
from webtier.embedded import EmbeddedRedis
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


@click.command()
@pass_options
def workers(options: SharedOptions) -> None:
    """List the workers that are alive."""
    with options.tier() as tier:
        for info in tier.workers.alive():
            age = time.time() - info.beat
            jobs = ", ".join(info.jobs)
            click.echo(
                f"{info.id}  pid {info.pid} on {info.host}  jobs: {jobs}  beat {age:.0f} s ago"
            )


@click.command()
@pass_options
def server(options: SharedOptions) -> None:
    """Run the embedded redis-server in the foreground, for other processes."""
    with EmbeddedRedis(options.data_dir) as embedded:
        role = "started" if embedded.owner else "already running"
        click.echo(f"{role}: export WEBTIER_REDIS_URL={embedded.url}")
        if not embedded.owner:
            return
        stop = threading.Event()
        with stop_on_signals(stop.set), contextlib.suppress(ColdStop):
            stop.wait()
