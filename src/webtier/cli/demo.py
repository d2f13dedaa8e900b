"""``webtier demo``: the README's first command, the shop with traffic."""

from __future__ import annotations

import click

from webtier.cli.shared import FiniteFloat, SharedOptions, pass_options
from webtier.config import Config


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
    help="Port to serve on (0: a free one).",
)  # fmt: skip
@click.option(
    "--items", type=click.IntRange(1, 10_000_000), default=100_000, show_default=True,
    help="Items in the shop (made on the first run, reused by the next).",
)  # fmt: skip
@click.option(
    "--rate", type=FiniteFloat(min=0, min_open=True, max=1e6), default=20.0, show_default=True,
    help="Visitors a second of the shop's own traffic.",
)  # fmt: skip
@click.option("--no-traffic", is_flag=True, help="Serve the shop without traffic of its own.")
@click.option(
    "--workers", type=click.IntRange(1, 64), default=1, show_default=True,
    help="Processes serving the shop on one socket (the first runs the jobs).",
)  # fmt: skip
@click.option(
    "--duration",
    type=FiniteFloat(min=0, min_open=True, max=1e9),
    help="Stop after this many seconds (default: until Ctrl-C).",
)
@pass_options
def demo(
    options: SharedOptions,
    host: str,
    port: int,
    items: int,
    rate: float,
    no_traffic: bool,
    workers: int,
    duration: float | None,
) -> None:
    """Fake Web Retailer: a web shop on webtier, with visitors, at a local URL.

    Every page goes through webtier: sessions and carts, the page cache,
    the row cache, the view ranking, counters and access times. Ctrl-C
    stops it; then try ``webtier ranking top``, ``webtier stats slowest``
    and ``webtier sessions stats``."""
    from webtier.demo.serve import DemoOptions, run  # uvicorn, SQLAlchemy: only when it runs

    config = Config(prefix=options.prefix, stats=options.stats, sessions=options.sessions)
    run(
        DemoOptions(
            url=options.url,
            data_dir=options.data_dir,
            database=options.database_url(),
            config=config,
            host=host,
            port=port,
            items=items,
            rate=rate,
            traffic=not no_traffic,
            duration=duration,
            workers=workers,
        )
    )
