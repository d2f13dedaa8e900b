"""The ``webtier`` group: the options every command shares, commands
imported only when run, and a missing extra as one line."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from webtier.cli.shared import SharedOptions
from webtier.errors import MissingExtra


class ExitForMissingExtra(click.ClickException):
    """Click's form of :class:`MissingExtra`: its one-line message and
    exit status 2 (as for a usage error: nothing was done)."""

    exit_code = 2


class LazyCommand(click.Command):
    """Stands in a group's listing for a command imported only when run, so
    that ``webtier --help`` imports none of its dependencies."""

    def __init__(self, name: str, load: Callable[[], click.Command], short_help: str) -> None:
        super().__init__(name, short_help=short_help, help=short_help)
        self.load = load


class CommandGroup(click.Group):
    """A group whose lazy commands load when resolved, and whose commands'
    missing extras end the run with the message naming the extra."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if isinstance(command, LazyCommand):
            command = command.load()
        return name, command, rest

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MissingExtra as missing:
            raise ExitForMissingExtra(str(missing)) from missing


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="WEBTIER_REDIS_URL",
    help="Redis to use: redis://, rediss://, unix:// or redis+cluster://host:port[,...]. "
    "Default: webtier's embedded redis-server.",
)
@click.option(
    "--data-dir",
    envvar="WEBTIER_DATA_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the embedded redis-server keeps its data [default: ~/.local/share/webtier/redis].",
)
@click.option(
    "--prefix", envvar="WEBTIER_PREFIX", default="webtier", show_default=True, help="Key prefix."
)
@click.option(
    "--database",
    envvar="WEBTIER_DATABASE_URL",
    help="SQLAlchemy URL of the shop's database, for the row cache. "
    "Default: shop.db (SQLite) beside the embedded redis-server's data.",
)
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.version_option(package_name="webtier")
@click.pass_context
def main(
    ctx: click.Context,
    url: str | None,
    data_dir: Path | None,
    prefix: str,
    database: str | None,
    verbose: int,
) -> None:
    """webtier: the Redis web tier of Redis in Action, for Python web apps."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    ctx.obj = SharedOptions(url or None, data_dir, prefix, database or None)
