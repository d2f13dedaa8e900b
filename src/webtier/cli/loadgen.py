"""``webtier loadgen``: drive a running shop with the demo's traffic model
and say how it answered (:mod:`webtier.demo.loadgen`, the ``shop`` extra).

It talks HTTP to the shop, never to Redis, so it takes none of the group's
Redis options. It refuses a target that is not this machine unless given
``--allow-remote``: a load test aimed elsewhere by a typo is an attack.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from webtier.cli.failures import CommandFailed, CommandRefused
from webtier.cli.output import PIPE_WIDTH, json_option, print_json
from webtier.cli.shared import FiniteFloat
from webtier.errors import ConfigError

# Exit status after a second Ctrl-C, as a shell reports a command killed by SIGINT.
INTERRUPTED_STATUS = 128 + signal.SIGINT
# Seconds visitors have to finish their request at the first Ctrl-C.
GRACE = 5.0

if TYPE_CHECKING:
    from webtier.demo.loadgen import LoadReport


@click.command()
@click.argument("target", metavar="URL")
@click.option(
    "--rate",
    type=FiniteFloat(min=0, min_open=True, max=100_000),
    default=20.0,
    show_default=True,
    help="Visitors arriving per second (each sees about eight pages).",
)
@click.option(
    "--duration",
    type=FiniteFloat(min=0, min_open=True, max=1e9),
    help="Stop after this many seconds (default: at Ctrl-C).",
)
@click.option(
    "--visitors",
    type=click.IntRange(1, 1_000_000_000),
    help="Send this many visitors, each to the end of its visit, then stop "
    "(a fixed amount of work, whatever the machine's speed).",
)
@click.option(
    "--users",
    type=click.IntRange(1, 10_000_000),
    default=1_000,
    show_default=True,
    help="Usernames visitors log in with (user1..userN).",
)
@click.option(
    "--items",
    type=click.IntRange(1, 1_000_000_000),
    default=100_000,
    show_default=True,
    help="The shop's item count: item ids are 1..N, viewed with Zipf popularity.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 10_000),
    default=64,
    show_default=True,
    help="Most visitors inside at once (and HTTP connections); arrivals beyond wait.",
)
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), help="Repeat the same visitors.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a target that is not this machine (load someone else's server only with leave).",
)
@json_option
def loadgen(
    target: str,
    rate: float,
    duration: float | None,
    visitors: int | None,
    users: int,
    items: int,
    concurrency: int,
    seed: int | None,
    allow_remote: bool,
    as_json: bool,
) -> None:
    """Send the shop at URL realistic visitors and report how it answered.

    Visitors see the home page and Zipf-popular items, fill carts, log in,
    check out, come back with their cookies. When it stops (--visitors all
    done, --duration over, or Ctrl-C; twice: at once, without a report) it
    prints requests/s, latency percentiles per route and error counts; it
    exits 1 if every request failed (no answer at all from URL)."""
    from webtier.demo.loadgen import check_target, drive  # imports httpx: only when run

    try:
        base_url = check_target(target, allow_remote=allow_remote)
    except ConfigError as refused:
        raise CommandRefused(str(refused)) from None
    lengths = [f"{visitors} visitors"] if visitors is not None else []
    lengths += [] if duration is None else [f"at most {duration:g} s"]
    length = ", ".join(lengths) if lengths else "until Ctrl-C"

    async def run() -> LoadReport:
        stop = asyncio.Event()
        with _StopOnInterrupt(stop.set):
            # Said once Ctrl-C stops it warm: from here on it is safe to press.
            click.echo(f"loading {base_url}: {rate:g} visitors/s {length}", err=True)
            return await drive(
                base_url,
                rate=rate,
                duration=duration,
                visitors=visitors,
                users=users,
                seed=seed,
                stop=stop,
                items=items,
                concurrency=concurrency,
                grace=GRACE,
            )

    try:
        report = asyncio.run(run())
    except asyncio.CancelledError:  # Ctrl-C twice
        click.echo("stopped at once: no report", err=True)
        sys.exit(INTERRUPTED_STATUS)
    if as_json:
        print_json(report.as_dict())
    else:
        from rich.console import Console  # rich: only to print the table

        Console(width=None if sys.stdout.isatty() else PIPE_WIDTH).print(report.table())
    if report.requests and report.transport_errors == report.requests:
        # The report is printed (it is the evidence); the status says the
        # run measured nothing, for scripts and CI.
        raise CommandFailed(
            f"every request failed: {report.transport_errors:,} transport errors, no answer "
            f"from {base_url} (is the shop running there?)"
        )


class _StopOnInterrupt:
    """First Ctrl-C (or SIGTERM): stop sending, let visitors finish, report.
    Second: cancel what is in flight and end without a report."""

    def __init__(self, request_stop: Callable[[], None]) -> None:
        self.request_stop = request_stop
        self.signals: list[int] = []
        self.asked = False

    def _handle(self, task: asyncio.Task[object] | None) -> None:
        if self.asked and task is not None:
            task.cancel()
            return
        self.asked = True
        click.echo("stopping: visitors finish their request (Ctrl-C again: now)", err=True)
        self.request_stop()

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach the main thread only (a test's runner)
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._handle, task)
            self.signals.append(sig)

    def __exit__(self, *exc: object) -> None:
        loop = asyncio.get_running_loop()
        for sig in self.signals:
            loop.remove_signal_handler(sig)
