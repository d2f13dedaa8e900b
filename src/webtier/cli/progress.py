"""Progress bars with rate and ETA for long work, on stderr, and only when
stderr is a terminal: never in ``--json`` mode, in a pipe or in a log."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

Advance = Callable[[int], None]


class RateColumn(ProgressColumn):
    """Items per second, e.g. ``12,345 rows/s``."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        shown = "?" if speed is None else f"{speed:,.0f}"
        return Text(f"{shown} {self.unit}/s", style="progress.data.speed")


def shows_progress() -> bool:
    """Whether a progress bar is drawn: stderr is a terminal. (The commands
    with bars write; none prints a ``--json`` document.)"""
    return sys.stderr.isatty()


def _ignore(done: int) -> None:
    return None


@contextlib.contextmanager
def progress(what: str, total: int | None, unit: str) -> Iterator[Advance]:
    """A function to call with how many ``unit`` were just done; it draws a
    bar (done of ``total``, percent, rate, time left) on a terminal's
    stderr, and does nothing otherwise."""
    if not shows_progress():
        yield _ignore
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        RateColumn(unit),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with bar:
        task = bar.add_task(what, total=total)

        def advance(done: int) -> None:
            bar.advance(task, done)

        yield advance
