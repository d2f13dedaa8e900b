"""The ``webtier`` command (also ``python -m webtier``).

Options shared by every command are declared once, on the group
(:mod:`webtier.cli.group`), and read from the environment there, at the edge:
``--url`` (``WEBTIER_REDIS_URL``), ``--data-dir`` (``WEBTIER_DATA_DIR``),
``--prefix`` (``WEBTIER_PREFIX``). Without a URL, commands use webtier's
embedded redis-server in the data directory; several webtier processes
share it. Each command group is a module of this package; this one only
puts them together. Needs the ``cli`` extra (click and rich).
"""

from __future__ import annotations

from webtier._core.extras import extra_needed

# Before the command modules, which import click: without it, one line.
with extra_needed("cli", "the webtier command"):
    import click  # noqa: F401

from webtier.cli import (
    bench,
    completion,
    counters,
    dashboard,
    demo,
    loadgen,
    ranking,
    rows,
    server,
    sessions,
    size,
    stats,
    workers,
)
from webtier.cli.anywhere import offer_global_options
from webtier.cli.group import LazyCommand, main
from webtier.cli.settings import settings

__all__ = ["main"]


for command in (
    workers.worker,
    workers.workers,
    demo.demo,
    server.server,
    server.reset,
    rows.rows,
    counters.counters,
    stats.stats,
    ranking.ranking,
    sessions.sessions,
    dashboard.dashboard,
    dashboard.metrics,
    size.size,
):
    main.add_command(offer_global_options(command, main))
main.add_command(LazyCommand("bench", bench.bench, bench.SHORT_HELP))
main.add_command(offer_global_options(settings, main))
main.add_command(loadgen.loadgen)  # talks HTTP to a shop, not to Redis
main.add_command(completion.completion)
