"""``webtier sessions``: inspect and clean the session store."""

from __future__ import annotations

import time

import click

from webtier.cli.shared import SharedOptions, pass_options, with_app_settings
from webtier.config import SessionSettings
from webtier.errors import WebtierError


@click.group()
@click.option("--shards", default=64, show_default=True, help="Shards, as the app set them.")
@click.pass_context
def sessions(ctx: click.Context, shards: int) -> None:
    """Inspect and clean the session store."""
    try:
        settings = SessionSettings(shards=shards)
    except WebtierError as error:
        raise click.BadParameter(str(error)) from error
    with_app_settings(ctx, sessions=settings)


def _when(seconds: float | None) -> str:
    return "-" if seconds is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


@sessions.command("stats")
@pass_options
def sessions_stats(options: SharedOptions) -> None:
    """How many sessions there are, and when the oldest and newest were seen."""
    with options.tier() as tier:
        found = tier.sessions.stats()
    click.echo(
        f"{found.sessions} sessions (busiest shard {found.busiest_shard}); "
        f"oldest seen {_when(found.oldest)}, newest seen {_when(found.newest)}"
    )


@sessions.command("clean")
@click.option(
    "--limit", type=click.IntRange(min=0), default=10_000_000, show_default=True,
    help="Keep this many sessions, the most recently seen.",
)  # fmt: skip
@pass_options
def sessions_clean(options: SharedOptions, limit: int) -> None:
    """One cleaner pass: remove the least recently seen sessions beyond --limit."""
    with options.tier() as tier:
        report = tier.sessions.clean(limit=limit)
    click.echo(
        f"{report.deleted} removed, {report.spared} spared (touched meanwhile), "
        f"{report.remaining} left, in {report.seconds:.3f} s"
    )


@sessions.command("user")
@click.argument("user")
@click.option("--revoke-all", is_flag=True, help="End every session of USER.")
@pass_options
def sessions_user(options: SharedOptions, user: str, revoke_all: bool) -> None:
    """List USER's sessions (public id, created, last seen), or end them all."""
    with options.tier() as tier:
        if revoke_all:
            click.echo(f"{tier.sessions.revoke_all(user)} sessions ended")
            return
        for session in tier.sessions.of_user(user):
            click.echo(
                f"{session.id}  created {_when(session.created)}  seen {_when(session.last_seen)}"
            )
