"""What the options every command shares say, and the tier they open."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from webtier._core.replicas import replica_reads
from webtier.cli.deployment import following_deployment
from webtier.config import Config, RowSettings, SessionSettings, StatsSettings
from webtier.connect import open as open_tier
from webtier.embedded import default_data_dir
from webtier.sync import WebTier

if TYPE_CHECKING:
    from webtier.rows import Source
    from webtier.rows.sql import SqlSource


@dataclass(frozen=True)
class SharedOptions:
    """Where Redis is, how keys are named, where the shop's database is; a
    command group may add the settings the app uses (``stats``, ``sessions``)."""

    url: str | None
    data_dir: Path | None
    prefix: str
    database: str | None = None  # SQLAlchemy URL of the shop's database
    stats: StatsSettings = field(default_factory=StatsSettings)
    sessions: SessionSettings = field(default_factory=SessionSettings)

    @contextlib.contextmanager
    def tier(self, *, with_rows: bool = False, lag_tolerated: bool = False) -> Iterator[WebTier]:
        """A tier on the Redis of the options; ``with_rows``: with the shop's
        row sources configured (what the worker refreshes); ``lag_tolerated``:
        for a command that only reads, whose reads a replica may serve if
        the URL allows it (:func:`webtier.replica_reads`). A webtier error
        inside the block ends the command with its one-line message (the
        group shows it: webtier.cli.failures)."""
        sources = self.row_sources() if with_rows else ()
        config = Config(
            prefix=self.prefix,
            rows=RowSettings(sources=sources),
            stats=self.stats,
            sessions=self.sessions,
        )
        with contextlib.ExitStack() as stack:
            if lag_tolerated:
                stack.enter_context(replica_reads())
            tier = stack.enter_context(open_tier(self.url, config=config, data_dir=self.data_dir))
            yield following_deployment(tier)  # refuses settings the deployment's contradict

    # -- row cache ----------------------------------------------------------------------
    def database_url(self) -> str:
        """The shop's database: ``--database``, else the demo's SQLite file."""
        return self.database or f"sqlite:///{shop_db_path(self.data_dir)}"

    def inventory(self) -> SqlSource:
        """The shop's inventory table, as a row source."""
        from webtier.demo import shopdb  # imports SQLAlchemy: only for commands that need it

        return shopdb.inventory_source(self.database_url())

    def row_sources(self) -> tuple[Source, ...]:
        """The shop's inventory, if a database was named or the demo's SQLite
        file exists; else none."""
        if self.database is None and not shop_db_path(self.data_dir).exists():
            return ()
        return (self.inventory(),)


class FiniteFloat(click.FloatRange):
    """A float option within bounds, never nan or infinity (click's
    FloatRange lets nan through: it compares false with either bound)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def shop_db_path(data_dir: Path | None) -> Path:
    """The demo shop's SQLite file: ``shop.db`` in ``--data-dir``, else beside
    the embedded redis-server's default data directory."""
    return (data_dir if data_dir is not None else default_data_dir().parent) / "shop.db"


pass_options = click.make_pass_decorator(SharedOptions)


def with_app_settings(
    ctx: click.Context,
    *,
    stats: StatsSettings | None = None,
    sessions: SessionSettings | None = None,
) -> None:
    """The commands of ``ctx``'s group open their tier with the settings the
    app uses (given on the group's command line), the rest as shared."""
    options = ctx.find_object(SharedOptions)
    if options is None:  # the group was run alone, not under ``webtier``
        raise click.UsageError("run it as a command of webtier")
    ctx.obj = dataclasses.replace(
        options, stats=stats or options.stats, sessions=sessions or options.sessions
    )


def deletes(command: Any) -> Any:
    """``--yes`` and ``--dry-run``: the options of every command that deletes data."""
    command = click.option(
        "--dry-run", is_flag=True, help="Only say what would be deleted, and delete nothing."
    )(command)
    return click.option("--yes", is_flag=True, help="Do not ask for confirmation.")(command)


def confirm_deletion(what: str, *, yes: bool, dry_run: bool) -> bool:
    """Whether to delete ``what`` (said in full, with its counts) now. With
    ``--dry-run`` it is only said (False); otherwise it is asked, unless
    ``--yes``; a no ends the command with one line, nothing deleted."""
    if dry_run:
        click.echo(f"would delete {what}; nothing deleted (--dry-run)")
        return False
    confirm(f"Delete {what}?", yes)
    return True


def confirm(question: str, yes: bool) -> None:
    """Go on only if ``--yes`` was given or the answer is yes; otherwise end
    with one line, also when there is nothing to read the answer from."""
    if yes:
        return
    try:
        agreed = click.confirm(question)
    except click.Abort:  # end of input, or Ctrl-C at the question
        agreed = False
    if not agreed:
        raise click.ClickException("not confirmed: nothing was changed (--yes skips the question)")
