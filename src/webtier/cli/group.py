"""The ``webtier`` group: the options every command shares, commands
imported only when run, and every failure as one line
(:mod:`webtier.cli.failures`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from webtier._core.keys import check_prefix
from webtier.cli.failures import VERBOSITY, as_command_failure, show_traceback
from webtier.cli.shared import SharedOptions
from webtier.errors import ConfigError


class LazyCommand(click.Command):
    """Stands in a group's listing for a command imported only when run, so
    that ``webtier --help`` imports none of its dependencies."""

    def __init__(self, name: str, load: Callable[[], click.Command], short_help: str) -> None:
        super().__init__(name, short_help=short_help, help=short_help)
        self.load = load


class CommandGroup(click.Group):
    """A group whose lazy commands load when resolved, and whose commands'
    failures end the run with one line (a traceback only with ``-vv``)."""

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
        except (click.exceptions.Exit, click.Abort):
            raise  # a command's own exit, or Ctrl-C: click ends those itself
        except Exception as error:
            verbosity = int(ctx.meta.get(VERBOSITY, 0))
            if verbosity >= 2 and not isinstance(error, click.ClickException):
                show_traceback(error)
            raise as_command_failure(error, verbosity) from error


def _checked_prefix(ctx: click.Context, param: click.Parameter, prefix: str) -> str:
    # Here rather than when the tier is made: a bad prefix is a usage error.
    try:
        return check_prefix(prefix)
    except ConfigError as error:
        raise click.BadParameter(str(error), ctx, param) from None


def _checked_data_dir(
    ctx: click.Context, param: click.Parameter, data_dir: str | None
) -> Path | None:
    # An empty value would be Path(""), the current directory: the embedded
    # server's files would land wherever the command ran. "." says so.
    if data_dir is None:
        return None
    if not data_dir.strip():
        raise click.BadParameter("names no directory (use '.' for the current one)", ctx, param)
    return Path(data_dir)


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="WEBTIER_REDIS_URL",
    help="Redis to use: redis://, rediss://, unix://, redis+cluster://host:port[,...] "
    "or redis+sentinel://host:port[,...]/service[/db]. "
    "Default: webtier's embedded redis-server.",
)
@click.option(
    "--data-dir",
    envvar="WEBTIER_DATA_DIR",
    type=click.Path(file_okay=False),
    callback=_checked_data_dir,
    help="Where the embedded redis-server keeps its data [default: ~/.local/share/webtier/redis].",
)
@click.option(
    "--prefix",
    envvar="WEBTIER_PREFIX",
    default="webtier",
    show_default=True,
    callback=_checked_prefix,
    help="Key prefix.",
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
    ctx.meta[VERBOSITY] = verbose
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    ctx.obj = SharedOptions(url or None, data_dir, prefix, database or None)
