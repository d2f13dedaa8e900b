"""How the read commands print: a table with headers and units for people,
or, with ``--json``, one JSON document for scripts.

A JSON document's field names are stable and carry their unit
(``mean_seconds``, ``last_seen_epoch``); each command's document is
described by a JSON Schema shipped beside this module
(``schemas/<group>-<command>.json``, :func:`schema`). An empty result says
so in words; a name that is not there ends the command with exit status 1
(:func:`not_found`), after the JSON document in ``--json`` mode.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

JSON_HELP = "Print one JSON document (stable field names, units in the names) instead of a table."

# Wide enough off a terminal that rich never wraps a row of a piped table.
PIPE_WIDTH = 200


def json_option(command: F) -> F:
    """The ``--json`` flag of a read command, passed as ``as_json``."""
    return click.option("--json", "as_json", is_flag=True, help=JSON_HELP)(command)


def print_json(document: Mapping[str, Any]) -> None:
    """``document`` as one JSON document on stdout."""
    click.echo(json.dumps(document, indent=2, default=str))


def print_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    title: str | None = None,
    right: Sequence[str] = (),
) -> None:
    """A table of ``rows`` under ``headers``; the columns named in ``right``
    (figures) are right-aligned."""
    from rich import box  # rich: only for the commands that print a table
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left"
    )
    for header in headers:
        table.add_column(header, justify="right" if header in right else "left")
    for row in rows:
        table.add_row(*(str(cell) for cell in row))
    # On the current stdout (click's runner swaps it in tests).
    console = Console(width=None if sys.stdout.isatty() else PIPE_WIDTH, soft_wrap=False)
    with console.capture() as captured:
        console.print(table)
    # Without rich's padding to the full width: clean in a pipe or a diff.
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def print_fields(pairs: Iterable[tuple[str, object]], *, title: str | None = None) -> None:
    """One record as a two-column table: field (with its unit), value."""
    print_table(("field", "value"), pairs, title=title)


def say_empty(message: str) -> None:
    """An empty result, said in words (exit status 0: nothing is missing)."""
    click.echo(message)


def not_found(message: str) -> click.ClickException:
    """The error for a name that is not there: its message, exit status 1."""
    return click.ClickException(message)


def local_time(epoch: float | None) -> str:
    """Seconds since the epoch as local time for people; ``-`` for none."""
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def figure(value: float | None) -> str:
    """A measured figure, six significant digits; ``-`` for none."""
    return "-" if value is None else f"{value:.6g}"


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the document that command ``name`` prints
    (``"counters-show"``: ``webtier counters show --json``)."""
    text = resources.files("webtier.cli").joinpath("schemas", f"{name}.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def jsonable(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A database row as JSON values: decimals, dates and the like as text
    (exact, as the row cache keeps them)."""
    if row is None:
        return None
    loaded: dict[str, Any] = json.loads(json.dumps(row, default=str))
    return loaded
