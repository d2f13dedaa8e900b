"""``webtier sessions``: inspect and clean the session store."""

from __future__ import annotations

import click

from webtier.cli.output import (
    json_option,
    local_time,
    not_found,
    print_fields,
    print_json,
    print_table,
    say_empty,
)
from webtier.cli.progress import progress
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


@sessions.command("stats")
@json_option
@pass_options
def sessions_stats(options: SharedOptions, as_json: bool) -> None:
    """How many sessions there are, and when the oldest and newest were seen."""
    with options.tier() as tier:
        found = tier.sessions.stats()
    if as_json:
        print_json(
            {
                "sessions": found.sessions,
                "busiest_shard_sessions": found.busiest_shard,
                "oldest_seen_epoch": found.oldest,
                "newest_seen_epoch": found.newest,
            }
        )
    elif not found.sessions:
        say_empty(f"0 sessions (in {options.sessions.shards} shards)")
    else:
        print_fields(
            (
                ("sessions", found.sessions),
                ("sessions in the busiest shard", found.busiest_shard),
                ("oldest seen (local time)", local_time(found.oldest)),
                ("newest seen (local time)", local_time(found.newest)),
            )
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
        over = max(0, tier.sessions.stats().sessions - limit)
        deleted = spared = 0
        seconds = 0.0
        with progress("removing sessions", over or None, "sessions") as advance:
            while True:  # step by step, for the progress bar
                step = tier.sessions.clean(limit=limit, max_steps=1)
                deleted, spared = deleted + step.deleted, spared + step.spared
                seconds += step.seconds
                advance(step.deleted)
                if not step.more:
                    break
    click.echo(
        f"{deleted} removed, {spared} spared (touched meanwhile), "
        f"{step.remaining} left, in {seconds:.3f} s"
    )


@sessions.command("user")
@click.argument("user")
@click.option("--revoke-all", is_flag=True, help="End every session of USER.")
@json_option
@pass_options
def sessions_user(options: SharedOptions, user: str, revoke_all: bool, as_json: bool) -> None:
    """List USER's sessions (public id, created, last seen), or end them all
    (exit status 1 if USER has no live session)."""
    with options.tier() as tier:
        if revoke_all:
            click.echo(f"{tier.sessions.revoke_all(user)} sessions ended")
            return
        found = tier.sessions.of_user(user)
    if as_json:
        print_json(
            {
                "user": user,
                "sessions": [
                    {"id": s.id, "created_epoch": s.created, "last_seen_epoch": s.last_seen}
                    for s in found
                ],
            }
        )
    elif found:
        print_table(
            ("session id", "created (local time)", "last seen (local time)"),
            ((s.id, local_time(s.created), local_time(s.last_seen)) for s in found),
            title=f"sessions of {user}, most recently seen first",
        )
    if not found:
        raise not_found(f"user {user!r} has no live session")


@sessions.command("revoke")
@click.argument("token")
@pass_options
def sessions_revoke(options: SharedOptions, token: str) -> None:
    """End the session of TOKEN (the cookie's value): its data, viewed items
    and cart are gone. Exit status 1 if there is no such live session."""
    with options.tier() as tier:
        if tier.sessions.info(token) is None:
            raise not_found("no live session has that token")
        tier.sessions.logout(token)
    click.echo("session ended")
