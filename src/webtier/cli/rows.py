"""``webtier rows``: the row cache on the demo shop's inventory.

The database is ``--database`` (``WEBTIER_DATABASE_URL``), else the demo's
SQLite file; ``webtier rows init`` creates and seeds it. ``webtier worker``
then keeps the scheduled rows fresh. SQLAlchemy is imported by the commands
that run, never by ``webtier --help``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from webtier._core.extras import extra_needed
from webtier.cli.output import (
    json_option,
    jsonable,
    not_found,
    print_fields,
    print_json,
    print_table,
)
from webtier.cli.progress import progress, shows_progress
from webtier.cli.refresh_progress import refresh_watched
from webtier.cli.shared import SharedOptions, confirm_deletion, deletes, pass_options


def _fail(error: Exception) -> click.ClickException:
    return click.ClickException(str(error).splitlines()[0])


def _missing_sqlite_folder(engine: Any, *, named: bool) -> Path | None:
    """The folder of a SQLite file named by ``--database`` if it does not
    exist: a typo in a path is refused rather than created."""
    path = engine.url.database
    if not named or engine.dialect.name != "sqlite" or not path or path == ":memory:":
        return None
    folder = Path(path).parent
    return None if folder.is_dir() else folder


@click.group()
def rows() -> None:
    """The row cache: inventory rows of the shop's database, kept fresh in Redis."""


@rows.command("init")
@click.option(
    "--items", type=click.IntRange(0, 10_000_000), default=1000, show_default=True,
    help="Items 1..N to have in stock (up to 10000000).",
)  # fmt: skip
@click.option("--reset", is_flag=True, help="Drop the shop's tables first (inventory and orders).")
@deletes
@pass_options
def init(options: SharedOptions, items: int, reset: bool, yes: bool, dry_run: bool) -> None:
    """Create the shop's database and seed its inventory.

    A SQLite file named by --database is created in an existing folder only;
    the default one (beside the embedded data) gets its folder made."""
    with extra_needed("sql", "the row cache commands"):
        import sqlalchemy as sa

    from webtier.demo import shopdb
    from webtier.rows.sql import open_engine

    try:
        engine = open_engine(options.database_url(), create=True)
    except sa.exc.SQLAlchemyError as error:
        raise _fail(error) from error
    folder = _missing_sqlite_folder(engine, named=options.database is not None)
    if folder is not None:
        raise click.ClickException(
            f"folder {folder} does not exist: create it first "
            "(webtier creates only its own data directory, not one --database names)"
        )
    try:
        if reset and not _confirm_reset(engine, yes=yes, dry_run=dry_run):
            return
        if dry_run:
            click.echo("would delete nothing (no --reset)")
            return
        added = shopdb.create(engine, items, reset=reset)
    except sa.exc.SQLAlchemyError as error:
        raise _fail(error) from error
    finally:
        engine.dispose()
    click.echo(f"{engine.url.render_as_string(hide_password=True)}: {added} items added")


def _confirm_reset(engine: Any, *, yes: bool, dry_run: bool) -> bool:
    """Say which of the shop's tables --reset drops, with their rows; ask."""
    import sqlalchemy as sa

    from webtier.demo import shopdb
    from webtier.rows.sql import shown

    present = set(sa.inspect(engine).get_table_names())
    counts = []
    with engine.connect() as conn:
        for table in shopdb.metadata.sorted_tables:
            if table.name in present:
                rows = conn.scalar(sa.select(sa.func.count()).select_from(table)) or 0
                counts.append(f"{table.name} ({rows:,} rows)")
    if not counts:
        return True  # nothing to drop
    what = f"the shop's tables {', '.join(counts)} in {shown(engine.url)}"
    return confirm_deletion(what, yes=yes, dry_run=dry_run)


@rows.command("schedule")
@click.argument("item_ids", nargs=-1, type=int)
@click.option("--all", "every", is_flag=True, help="Every item of the inventory table.")
@click.option(
    "--delay", type=float, required=True, help="Seconds between refreshes; <= 0 unschedules."
)
@pass_options
def schedule(options: SharedOptions, item_ids: tuple[int, ...], every: bool, delay: float) -> None:
    """Refresh ITEM_IDS (or --all) every --delay seconds."""
    source = options.inventory()
    if every:
        import sqlalchemy as sa  # there: the inventory source needs it

        from webtier.demo import shopdb

        try:
            with source.engine.connect() as conn:
                item_ids = tuple(conn.scalars(sa.select(shopdb.inventory.c.item_id)))
        except sa.exc.SQLAlchemyError as error:
            raise _fail(error) from error
    if not item_ids:
        raise click.UsageError("name item ids, or --all")
    verb = "scheduling" if delay > 0 else "unscheduling"
    with options.tier() as tier, progress(verb, len(item_ids), "rows") as advance:
        for item_id in item_ids:
            tier.rows.schedule(source, item_id, delay)
            advance(1)
    verb = "scheduled" if delay > 0 else "unscheduled"
    click.echo(f"{len(item_ids)} items {verb}")


@rows.command("refresh")
@pass_options
def refresh(options: SharedOptions) -> None:
    """Refresh every scheduled row that is due now, once (the worker does it
    continuously)."""
    source = options.inventory()
    with options.tier() as tier:
        if shows_progress():
            report = refresh_watched(options, tier, source)
        else:
            report = tier.rows.refresh_due([source])
    click.echo(
        f"{report.claimed} due: {report.stored} stored, {report.removed} removed, "
        f"{report.fenced} fenced, {report.dropped} dropped, {report.failed} failed "
        f"in {report.seconds:.2f} s"
    )


@rows.command("show")
@click.argument("item_id", type=int)
@click.option("--load", is_flag=True, help="On a miss, read the row from the database.")
@json_option
@pass_options
def show(options: SharedOptions, item_id: int, load: bool, as_json: bool) -> None:
    """The cached copy of ITEM_ID (exit status 1 if none)."""
    with options.tier() as tier:
        row = tier.rows.get(options.inventory(), item_id, load=load)
    shown = jsonable(row)
    if as_json:
        print_json({"item_id": item_id, "row": shown})
    elif shown is not None:
        print_fields(shown.items(), title=f"item {item_id}, cached")
    if shown is None:
        raise not_found(f"item {item_id} is not cached")


@rows.command("invalidate")
@click.argument("item_ids", nargs=-1, type=int, required=True)
@pass_options
def invalidate(options: SharedOptions, item_ids: tuple[int, ...]) -> None:
    """Drop the cached copies of ITEM_IDS (after changing them in the database)."""
    source = options.inventory()
    with options.tier() as tier:
        dropped = sum(tier.rows.invalidate(source, item_id) for item_id in item_ids)
    click.echo(f"{dropped} cached copies dropped")


@rows.command("status")
@json_option
@pass_options
def status(options: SharedOptions, as_json: bool) -> None:
    """How many rows are scheduled, due and being loaded."""
    with options.tier() as tier:
        now = tier.rows.status(options.inventory())
    if as_json:
        print_json(
            {
                "source": options.inventory().name,
                "scheduled_rows": now.scheduled,
                "due_rows": now.due,
                "loading_rows": now.loading,
            }
        )
    else:
        print_table(
            ("scheduled rows", "due rows", "loading rows"),
            [(now.scheduled, now.due, now.loading)],
            right=("scheduled rows", "due rows", "loading rows"),
        )
