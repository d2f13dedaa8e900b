"""``webtier demo``: the README's first command."""

from __future__ import annotations

import click

from webtier.cli.shared import FiniteFloat, SharedOptions, pass_options


@click.command()
@click.option(
    "--duration",
    type=FiniteFloat(min=0, min_open=True, max=1e9),
    help="Stop after this many seconds (default: until Ctrl-C).",
)
@click.option(
    "--rate", type=FiniteFloat(min=0, min_open=True, max=1e6), default=200.0, show_default=True,
    help="Simulated page views per second (up to 1000000).",
)  # fmt: skip
@pass_options
def demo(options: SharedOptions, duration: float | None, rate: float) -> None:
    """Simulated shop traffic recorded into counters, shown live."""
    from webtier.demo.traffic import run_demo  # imports rich: only when the demo runs

    with options.tier() as tier:
        run_demo(tier, duration=duration, rate=rate)
