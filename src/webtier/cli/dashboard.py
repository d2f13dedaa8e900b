"""``webtier dashboard`` (serves the dashboard with uvicorn) and
``webtier metrics`` (prints the Prometheus exposition once)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

import click

from webtier.cli.shared import SharedOptions, pass_options

# Each option also reads the environment, so a secret need not be on the
# command line (where other users of the machine may read it).
TOKEN_ENV = "WEBTIER_DASHBOARD_TOKEN"  # noqa: S105 (a variable name, not a secret)
BASIC_ENV = "WEBTIER_DASHBOARD_BASIC"


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8001, show_default=True, help="Port to bind."
)
@click.option(
    "--token", envvar=TOKEN_ENV, help=f"Bearer token required of readers (or ${TOKEN_ENV})."
)
@click.option(
    "--basic", envvar=BASIC_ENV, metavar="USER:PASSWORD",
    help=f"HTTP basic credentials required of readers (or ${BASIC_ENV}).",
)  # fmt: skip
@click.option("--allow-actions", is_flag=True, help="Offer purging cached pages (CSRF-protected).")
@click.option(
    "--allow-host", "allowed_hosts", multiple=True, metavar="NAME",
    help="Without credentials, a Host name answered besides localhost and loopback addresses "
    "(repeatable).",
)  # fmt: skip
@pass_options
def dashboard(
    options: SharedOptions,
    host: str,
    port: int,
    token: str | None,
    basic: str | None,
    allow_actions: bool,
    allowed_hosts: tuple[str, ...],
) -> None:
    """Serve the dashboard (charts of every counter, statistic and session
    figure, live) and /metrics. Beyond loopback it needs --token or --basic."""
    from webtier._core.extras import extra_needed
    from webtier.connect import connect_async
    from webtier.embedded import EmbeddedRedis

    with extra_needed("dashboard", "webtier dashboard"):
        import uvicorn

        from webtier.web.dashboard import Credentials, check_bind
        from webtier.web.dashboard import dashboard as make_dashboard

    credentials = Credentials.basic(basic) if basic else Credentials()
    credentials = dataclasses.replace(credentials, token=token or None)
    check_bind(host, credentials)
    with contextlib.ExitStack() as stack:
        # The embedded server, when no URL is given, lives as long as the command.
        url = options.url or stack.enter_context(EmbeddedRedis(options.data_dir)).url
        # The sync tier checks the deployment's settings and adopts them.
        with dataclasses.replace(options, url=url).tier(with_rows=True) as checked:
            config = checked.config
        from webtier.aio import WebTier

        tier = WebTier(connect_async(url), config)
        app = make_dashboard(
            tier,
            credentials=credentials,
            allow_actions=allow_actions,
            allowed_hosts=allowed_hosts,
        )

        @contextlib.asynccontextmanager
        async def lifespan(app: object) -> AsyncIterator[None]:
            yield
            await tier.client.aclose()  # in uvicorn's loop, where its connections live

        app.router.lifespan_context = lifespan
        click.echo(f"dashboard on http://{host}:{port}/ (Ctrl-C stops it)", err=True)
        uvicorn.run(app, host=host, port=port, log_level="warning")


@click.command()
@click.option(
    "--precision", type=click.IntRange(1), default=60, show_default=True,
    help="Seconds of the counters' slices reported as webtier_counts_last_slice.",
)  # fmt: skip
@click.option(
    "--periods", type=click.IntRange(1, 10_000), default=1, show_default=True,
    help="Statistics periods merged (1: the current one).",
)  # fmt: skip
@click.option("--openmetrics", is_flag=True, help="OpenMetrics text instead of Prometheus text.")
@pass_options
def metrics(options: SharedOptions, precision: int, periods: int, openmetrics: bool) -> None:
    """Print the Prometheus exposition of webtier's data once (the format a
    /metrics endpoint serves: the text is the machine format, no --json)."""
    from webtier._core.extras import extra_needed

    with extra_needed("metrics", "webtier metrics"):
        from webtier.metrics import Settings, exposition_of, read_snapshot

    with options.tier(with_rows=True) as tier:
        from webtier.overview import check_precision

        check_precision(tier.config, precision)
        snapshot = tier.transport.run(read_snapshot(tier.config, Settings(precision, periods)))
    accept = "application/openmetrics-text" if openmetrics else ""
    body, _ = exposition_of(snapshot, accept)
    click.echo(body.decode("utf-8"), nl=False)
