"""Progress bars with rate and ETA for long work, on stderr, and only when
stderr is a terminal: never in a pipe or a log (and no command with a bar
prints a ``--json`` document)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

Advance = Callable[[int], None]


def shows_progress() -> bool:
    """Whether a progress bar is drawn: stderr is a terminal."""
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
    from webtier.cli.progress_bar import drawn_bar  # rich: only to draw

    with drawn_bar(what, total, unit) as advance:
        yield advance
