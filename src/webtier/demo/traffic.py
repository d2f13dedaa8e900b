"""``webtier demo``: simulated shop traffic recorded into counters, shown live.

Visitors hit the Fake Web Retailer's pages with a long-tailed popularity (a
few items get most views, as in a real shop), in bursts around ``rate`` views
per second. Each view goes through the batched recorder; a worker thread
cleans counters as ``webtier worker`` would. A table shows, per page, the
views in the last complete slice of several precisions, refreshed each
second, until Ctrl-C or ``duration``.
"""

from __future__ import annotations

import random
import threading
import time

from webtier._core.extras import extra_needed
from webtier.sync import WebTier
from webtier.workers import JOBS, Worker

with extra_needed("cli", "the live demo"):
    from rich.console import Console, Group
    from rich.live import Live
    from rich.table import Table

PAGES = ["/", "/search", "/cart", "/checkout", *(f"/item/{i}" for i in range(1, 41))]
# Zipf-like weights: the home page and the first items take most views.
WEIGHTS = [1.0 / (rank + 1) ** 1.1 for rank in range(len(PAGES))]
SHOWN = (1, 5, 60, 300, 3600, 86400)  # precisions in the table
LABELS = {
    1: "last 1 s",
    5: "last 5 s",
    60: "last min",
    300: "last 5 min",
    3600: "last hour",
    86400: "today",
}
ROWS = 15


def run_demo(tier: WebTier, *, duration: float | None = None, rate: float = 200.0) -> None:
    stop = threading.Event()
    worker = Worker(tier, [JOBS["counters"]], stop=stop)
    cleaner = threading.Thread(target=worker.run, name="webtier-demo-cleaner", daemon=True)
    cleaner.start()
    traffic = threading.Thread(target=_visit, args=(tier, rate, stop), name="webtier-demo-traffic")
    traffic.start()
    console = Console()
    ends = None if duration is None else time.monotonic() + duration
    try:
        with Live(_view(tier), console=console, refresh_per_second=2, transient=False) as live:
            while ends is None or time.monotonic() < ends:
                time.sleep(1.0 if ends is None else max(0.0, min(1.0, ends - time.monotonic())))
                live.update(_view(tier))
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        traffic.join()
        cleaner.join(timeout=10)


def _visit(tier: WebTier, rate: float, stop: threading.Event) -> None:
    with tier.counters.recorder() as recorder:
        while not stop.is_set():
            # Traffic comes in bursts: the rate drifts between half and twice.
            burst = rate * random.uniform(0.5, 2.0)
            for page in random.choices(PAGES, WEIGHTS, k=max(1, int(burst / 10))):
                recorder.incr(f"views:{page}")
                recorder.incr("views:all")
            stop.wait(0.1)


def _view(tier: WebTier) -> Group:
    now = time.time()
    names = tier.counters.names("views:")
    columns = {p: _last_complete(tier, names, p, now) for p in SHOWN}
    table = Table(title="Fake Web Retailer: page views by precision", title_justify="left")
    table.add_column("page")
    for precision in SHOWN:
        table.add_column(LABELS[precision], justify="right")
    ranked = sorted(names, key=lambda n: -columns[300].get(n, 0))[: ROWS + 1]
    for name in ranked:
        page = "(all pages)" if name == "views:all" else name.removeprefix("views:")
        table.add_row(page, *(str(columns[p].get(name, 0)) for p in SHOWN))
    footer = Table.grid()
    footer.add_row(
        f"{len(names)} counters; Ctrl-C to stop. Try: webtier counters show views:all --precision 5"
    )
    return Group(table, footer)


def _last_complete(tier: WebTier, names: list[str], precision: int, now: float) -> dict[str, int]:
    """Each counter's count in the newest slice that has ended (the current
    one for precisions of a minute and more, which would read empty for long)."""
    current = int(now // precision) * precision
    wanted = current - precision if precision < 60 else current
    samples = tier.counters.get_many(names, precision, start=wanted, end=wanted) if names else {}
    return {name: sum(count for _, count in found) for name, found in samples.items()}
