"""``webtier rows refresh`` on a terminal: the refresh runs in a thread
while this one watches the schedule drain and draws the progress bar."""

from __future__ import annotations

import threading

from webtier.cli.progress import progress
from webtier.cli.shared import SharedOptions
from webtier.rows import Source
from webtier.sync import WebTier
from webtier.types import RefreshReport

# Seconds between two looks at the schedule.
WATCH_INTERVAL = 0.2


def refresh_watched(options: SharedOptions, tier: WebTier, source: Source) -> RefreshReport:
    """``tier.rows.refresh_due([source])``, with a progress bar of the rows
    due when it began that are no longer due (read on a connection of its
    own). Errors of the refresh are raised here, as without the bar."""
    outcome: list[RefreshReport | BaseException] = []

    def refresh() -> None:
        try:
            outcome.append(tier.rows.refresh_due([source]))
        except BaseException as error:  # handed to the calling thread
            outcome.append(error)

    with options.tier() as watcher:
        due = watcher.rows.status(source).due
        worker = threading.Thread(target=refresh, name="webtier-rows-refresh", daemon=True)
        with progress("refreshing", due or None, "rows") as advance:
            worker.start()
            shown = 0
            while worker.is_alive():
                worker.join(WATCH_INTERVAL)
                done = due - watcher.rows.status(source).due
                if done > shown:
                    advance(done - shown)
                    shown = done
    (result,) = outcome
    if isinstance(result, BaseException):
        raise result
    return result
