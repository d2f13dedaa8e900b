"""The progress bar itself (rich), imported only when one is drawn, so that
``webtier --help`` does not import rich."""

from __future__ import annotations

import contextlib
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


class RateColumn(ProgressColumn):
    """Items per second, e.g. ``12,345 rows/s``."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        shown = "?" if speed is None else f"{speed:,.0f}"
        return Text(f"{shown} {self.unit}/s", style="progress.data.speed")


@contextlib.contextmanager
def drawn_bar(what: str, total: int | None, unit: str) -> Iterator[Callable[[int], None]]:
    """A bar on stderr: done of ``total``, percent, rate, time left; gone
    when the block ends."""
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
