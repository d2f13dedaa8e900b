"""How a command that fails ends: one line on stderr, ``error: <the cause
and the fix>``, exit status 1 (2 for a usage error or a missing extra:
nothing was done), and a traceback only with ``-vv``.

Applied once, where the ``webtier`` group invokes its commands
(:class:`webtier.cli.group.CommandGroup`), so that no command needs a
``try`` of its own and a new command is covered as it is added.
"""

from __future__ import annotations

import traceback
from typing import IO, Any

import click

from webtier.errors import MissingExtra, WebtierError

# ctx.meta key: how many -v the group was given (2 or more: tracebacks too).
VERBOSITY = "webtier.verbosity"
TRACEBACK_HINT = "run with -vv for the traceback"


class CommandFailed(click.ClickException):
    """A failure as the command line shows it: ``error: `` and one line."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", file=file, err=file is None)


class CommandRefused(CommandFailed):
    """A failure before anything was done (a missing dependency): exit
    status 2, as for a usage error."""

    exit_code = 2


def one_line(text: str, fallback: str) -> str:
    """The first non-blank line of ``text`` (SQLAlchemy's and redis-py's
    messages run over several), else ``fallback``."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return fallback


def as_command_failure(error: Exception, verbosity: int) -> click.ClickException:
    """What the command line shows for ``error``, raised by a command.

    click's usage errors keep click's own form (usage block, exit status 2);
    everything else becomes one line. An error webtier did not foresee says
    what it is and how to see more, as the one line cannot hold a traceback.
    """
    name = type(error).__name__
    if isinstance(error, click.UsageError | CommandFailed):
        return error
    if isinstance(error, click.ClickException):
        kind = CommandRefused if error.exit_code == 2 else CommandFailed
        return kind(one_line(error.format_message(), name))
    if isinstance(error, MissingExtra):
        return CommandRefused(one_line(str(error), name))
    if isinstance(error, WebtierError):
        return CommandFailed(one_line(str(error), name))
    if isinstance(error, ModuleNotFoundError):
        # Not an extra of webtier's (those are MissingExtra): a dependency of
        # the repository's benchmarks, or a broken install.
        return CommandRefused(
            f"the module {error.name!r} is not installed; the benchmarks need the "
            "checkout's test dependencies: pip install -e '.[test]'"
        )
    hint = "" if verbosity >= 2 else f" ({TRACEBACK_HINT})"
    return CommandFailed(f"unexpected {name}: {one_line(str(error), 'no message')}{hint}")


def show_traceback(error: BaseException) -> None:
    click.echo("".join(traceback.format_exception(error)).rstrip(), err=True)
