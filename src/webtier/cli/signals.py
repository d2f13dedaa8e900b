"""Ctrl-C and SIGTERM for the long-running commands: warm stop, then cold."""

from __future__ import annotations

import contextlib
import signal
import types
from collections.abc import Callable, Iterator

import click

from webtier.workers import ColdStop


@contextlib.contextmanager
def stop_on_signals(
    request_stop: Callable[[], None], request_force_stop: Callable[[], None] | None = None
) -> Iterator[None]:
    """First SIGINT/SIGTERM: warm stop. Second: cold stop (raises ColdStop)."""
    asked = False

    def handler(signum: int, frame: types.FrameType | None) -> None:
        nonlocal asked
        if asked:
            if request_force_stop is not None:
                request_force_stop()
            raise ColdStop
        asked = True
        click.echo("stopping after the current step (signal again to stop now)", err=True)
        request_stop()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
