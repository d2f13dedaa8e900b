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
from webtier.cli.shared import (
    SharedOptions,
    confirm_deletion,
    deletes,
    pass_options,
    with_app_settings,
)
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
    with options.tier(lag_tolerated=True) as tier:
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
    "--keep", type=click.IntRange(min=0), default=10_000_000, show_default=True,
    help="Sessions to keep, the most recently seen; the others are deleted.",
)  # fmt: skip
@deletes
@pass_options
def sessions_clean(options: SharedOptions, keep: int, yes: bool, dry_run: bool) -> None:
    """One cleaner pass: delete every session but the --keep most recently
    seen (logged-in users' included), and those idle past their timeout."""
    with options.tier() as tier:
        total = tier.sessions.stats().sessions
        over = max(0, total - keep)
        what = (
            f"the {over:,} least recently seen of {total:,} sessions, logged-in users' "
            f"included (keeping the {min(keep, total):,} most recently seen), and any "
            "idle past their timeout"
        )
        if not confirm_deletion(what, yes=yes, dry_run=dry_run):
            return
        deleted = spared = 0
        seconds = 0.0
        with progress("removing sessions", over or None, "sessions") as advance:
            while True:  # step by step, for the progress bar
                step = tier.sessions.clean(keep=keep, max_steps=1)
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
@deletes
@pass_options
def sessions_user(
    options: SharedOptions, user: str, revoke_all: bool, as_json: bool, yes: bool, dry_run: bool
) -> None:
    """List USER's sessions (public id, created, last seen), or end them all
    (exit status 1 if USER has no live session)."""
    with options.tier() as tier:
        found = tier.sessions.of_user(user)
        if revoke_all:
            what = f"the {len(found)} live sessions of user {user!r}, their carts included"
            if found and confirm_deletion(what, yes=yes, dry_run=dry_run):
                click.echo(f"{tier.sessions.revoke_all(user)} sessions ended")
            elif not found:
                click.echo("0 sessions ended")
            return
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
@deletes
@pass_options
def sessions_revoke(options: SharedOptions, token: str, yes: bool, dry_run: bool) -> None:
    """End the session of TOKEN (the cookie's value): its data, viewed items
    and cart are gone. Exit status 1 if there is no such live session."""
    with options.tier() as tier:
        found = tier.sessions.info(token)
        if found is None:
            raise not_found("no live session has that token")
        whose = f"of user {found.user!r}" if found.user is not None else "(anonymous)"
        what = f"session {found.id} {whose}, with its data, viewed items and cart"
        if not confirm_deletion(what, yes=yes, dry_run=dry_run):
            return
        tier.sessions.logout(token)
    click.echo("session ended")
