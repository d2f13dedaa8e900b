"""``webtier server`` (run, ``status``, ``stop``) and ``webtier reset``: the
embedded redis-server, shared by the webtier processes of a data directory.

These commands act on the embedded server of ``--data-dir`` only, never on
the Redis of ``--url`` (which may well point at that same server)."""

from __future__ import annotations

import contextlib
import sys
import threading
from pathlib import Path

import click

from webtier.cli.output import json_option, print_json
from webtier.cli.shared import SharedOptions, confirm_deletion, deletes, pass_options
from webtier.cli.signals import stop_on_signals
from webtier.embedded import EmbeddedRedis, default_data_dir, stop_server
from webtier.embedded.status import server_status
from webtier.errors import EmbeddedServerError
from webtier.workers import ColdStop


def data_dir_of(options: SharedOptions) -> Path:
    return options.data_dir if options.data_dir is not None else default_data_dir()


def joined(options: SharedOptions, port: int = 0) -> EmbeddedRedis:
    """The embedded server, joined (started if need be); one line on failure."""
    try:
        return EmbeddedRedis(data_dir_of(options), port=port).start()
    except EmbeddedServerError as error:
        raise click.ClickException(str(error)) from error


@click.group(invoke_without_command=True)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Also listen on this TCP port, on 127.0.0.1 and ::1 only, with the password, "
    "until this command exits [default: the unix socket only].",
)
@click.pass_context
def server(ctx: click.Context, port: int) -> None:
    """The embedded redis-server: run it until Ctrl-C, its status, stop it.

    The server is shared: every webtier process using the same data
    directory joins it, and the last one to leave stops it (its data saved).
    This command keeps it running until Ctrl-C, and says when it died and
    came back (its keeper restarts a server that was killed)."""
    if ctx.invoked_subcommand is not None:
        return
    options = ctx.find_object(SharedOptions)
    assert options is not None  # set by the webtier group
    embedded = joined(options, port)
    try:
        role = "started" if embedded.owner else "already running"
        click.echo(f"{role}: export WEBTIER_REDIS_URL={embedded.url}")
        if embedded.tcp_url:
            click.echo(f"tcp (127.0.0.1 and ::1 only): {embedded.tcp_url}")
        sys.stdout.flush()
        stop = threading.Event()
        with stop_on_signals(stop.set), contextlib.suppress(ColdStop):
            while not stop.wait(1.0):
                state, what = embedded.check()
                if what:
                    click.echo(what, err=True)
                if state == "stopped":
                    break
                if state == "down":
                    sys.exit(1)
    finally:
        embedded.stop()


@server.command()
@json_option
@pass_options
def status(options: SharedOptions, as_json: bool) -> None:
    """Whether the embedded server runs: pid, socket, port, data, clients,
    memory (exit status 1 if it does not run)."""
    found = server_status(data_dir_of(options))
    if as_json:
        print_json(
            {
                "running": found.running,
                "data_dir": str(found.data_dir),
                "socket": str(found.socket_path),
                "pid": found.pid,
                "tcp_port": found.port or None,
                "tcp_addresses": list(found.bind) if found.port else [],
                "password_file": None if found.password_file is None else str(found.password_file),
                "connections": found.clients,
                "webtier_processes": found.users,
                "memory_human": found.memory or None,
                "last_event": found.last_event or None,
            }
        )
    else:
        for line in found.lines():
            click.echo(line)
    if not found.running:
        sys.exit(1)


@server.command()
@pass_options
def stop(options: SharedOptions) -> None:
    """Stop the embedded server now, whoever uses it (its data saved)."""
    data_dir = data_dir_of(options)
    if stop_server(data_dir):
        click.echo(f"stopped; data saved in {data_dir}")
    else:
        click.echo(f"not running (data dir {data_dir})")


@click.command()
@deletes
@pass_options
def reset(options: SharedOptions, yes: bool, dry_run: bool) -> None:
    """Empty the embedded redis-server (never a --url server)."""
    import redis

    data_dir = data_dir_of(options)
    if not data_dir.is_dir():  # no server was ever there: none is started to say so
        click.echo(f"nothing to delete: no embedded redis-server data in {data_dir}")
        return
    embedded = joined(options)
    try:
        client = redis.Redis.from_url(embedded.url)
        try:
            keys = client.dbsize()
            what = f"all {keys:,} keys of the embedded redis-server in {data_dir}, of every prefix"
            if not confirm_deletion(what, yes=yes, dry_run=dry_run):
                return
            client.flushall()
        finally:
            client.close()
    finally:
        embedded.stop()
    click.echo(f"deleted {keys} keys in {data_dir}")
