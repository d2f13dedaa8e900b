"""What a benchmark shows while it runs, on stderr: a progress bar of the
current measurement's timed runs (rate and time left) on a terminal, one
dim line per run elsewhere; and how Ctrl-C stops it."""

from __future__ import annotations

import contextlib
import signal
import threading
import types
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from benchmarks._harness import Ticker
from webtier.cli.progress import shows_progress
from webtier.cli.progress_bar import RateColumn


class BarTicker(Ticker):
    """Each measurement's timed runs as one bar, replaced by the next one's."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.task: TaskID | None = None

    def begin(self, what: str, runs: int) -> None:
        if self.task is None:
            self.task = self.bar.add_task(what, total=runs)
        else:
            self.bar.reset(self.task, total=runs, description=what)

    def tick(self) -> None:
        if self.task is not None:
            self.bar.advance(self.task)


@contextlib.contextmanager
def bench_progress() -> Iterator[tuple[Callable[[str], object], Ticker]]:
    """How the harness reports: ``say`` for a line, a ticker for the runs."""
    console = Console(stderr=True)

    def say(line: str) -> None:
        console.print(f"… {line}", style="dim")

    if not shows_progress():
        yield say, Ticker()
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn("runs"),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    with bar:
        yield say, BarTicker(bar)


@contextlib.contextmanager
def stop_on_interrupt() -> Iterator[threading.Event]:
    """The first Ctrl-C raises KeyboardInterrupt and sets the event it
    yields; later ones are ignored while the bench stops its processes."""
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return

    def interrupt(signum: int, frame: types.FrameType | None) -> None:
        if not interrupted.is_set():
            interrupted.set()
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)
