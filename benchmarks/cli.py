"""``webtier bench``: webtier against the book's listings, on a real server.

Each subcommand is one benchmark module; the options every benchmark takes
are declared once (:func:`bench_options`) and the run, rendering and
clean-up are shared (:func:`run_bench`). Benchmarks report; they never fail
on a timing.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from benchmarks import _render, counters, rowcache, sessions, stats
from benchmarks import ranking as view_ranking
from benchmarks._harness import Harness, Settings
from benchmarks._progress import bench_progress, stop_on_interrupt
from benchmarks._results import Report, Row
from webtier.cli.shared import SharedOptions
from webtier.errors import WebtierError

F = TypeVar("F", bound=Callable[..., Any])

# Exit status after Ctrl-C, as a shell reports a command killed by SIGINT.
INTERRUPTED_STATUS = 128 + signal.SIGINT


def _process_counts(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        counts = tuple(sorted({int(part) for part in value.split(",") if part.strip()}))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise click.BadParameter("give process counts >= 1, separated by commas, e.g. 1,4")
    return counts


def bench_options(command: F) -> F:
    """The options of every ``webtier bench`` subcommand."""
    options = [
        click.option(
            "--url",
            default=None,
            help="Redis to measure (one server; databases N and N+1 must be empty, "
            "the bench flushes them). Default: webtier's --url (WEBTIER_REDIS_URL), "
            "else a redis-server of its own on loopback TCP (never the embedded one).",
        ),
        click.option(
            "--seconds", type=click.FloatRange(min=0, min_open=True), default=2.0,
            show_default=True, help="Length of each timed run.",
        ),
        click.option(
            "--repeat", type=click.IntRange(min=1), default=3, show_default=True,
            help="Runs per figure; medians are reported.",
        ),
        click.option(
            "--processes", default="1,4", show_default=True, callback=_process_counts,
            help="Client process counts to measure with (redis-benchmark: connections).",
        ),
        click.option(
            "--scale", type=click.FloatRange(min=0, min_open=True), default=1.0,
            show_default=True, help="Multiply data set sizes by this (< 1 for a quick try).",
        ),
        click.option(
            "--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
            help="Also write the results to this JSON file.",
        ),
        click.option(
            "--markdown", is_flag=True, help="Print Markdown tables (for the docs) instead."
        ),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


@contextlib.contextmanager
def _exit_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM into SystemExit, so that the server the bench started and
    its worker processes are stopped on the way out (the default action would
    kill this process alone and leave them running)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def shared_url() -> str | None:
    """The URL given to ``webtier --url`` or in ``WEBTIER_REDIS_URL``, if any."""
    ctx = click.get_current_context(silent=True)
    options = None if ctx is None else ctx.find_object(SharedOptions)
    return None if options is None else options.url


def run_bench(
    title: str,
    bench: Callable[[Harness], list[Row]],
    *,
    url: str | None,
    seconds: float,
    repeat: int,
    processes: tuple[int, ...],
    scale: float,
    json_path: Path | None,
    markdown: bool,
) -> Report:
    """Run ``bench`` on a fresh harness and print (and save) its report."""
    url = url or shared_url()
    settings = Settings(seconds, repeat, processes, scale)
    harness: Harness | None = None
    rows: list[Row] = []
    with stop_on_interrupt() as interrupted:
        try:
            with (
                _exit_on_sigterm(),
                bench_progress() as (say, ticker),
                Harness.open(settings, url, say, ticker) as harness,
            ):
                rows = bench(harness)
        except BaseException as error:
            # After Ctrl-C, whatever the interrupted step raised (a server
            # gone with the same signal) ends in the results gathered so far.
            if not interrupted.is_set():
                if isinstance(error, WebtierError):
                    raise click.ClickException(str(error)) from error
                raise
            if harness is None:
                click.echo("interrupted (Ctrl-C) before the first measurement", err=True)
                sys.exit(INTERRUPTED_STATUS)
    if harness is None:  # pragma: no cover - the with block assigned it or raised
        raise click.Abort
    report = harness.report(title)
    if interrupted.is_set():
        report.notes.append(
            "interrupted (Ctrl-C): the measurements finished so far, without the summary"
        )
    report.rows = rows
    if json_path is not None:
        _render.write_json(report, json_path)
    if markdown:
        click.echo(_render.markdown(report))
    else:
        # Off a terminal, rich would wrap at 80 columns.
        _render.print_rich(report, Console(width=None if sys.stdout.isatty() else 200))
    if interrupted.is_set():
        sys.exit(INTERRUPTED_STATUS)
    return report


@click.group("bench")
def bench() -> None:
    """Benchmarks: webtier against the book's listings on a real Redis.

    Figures are medians; ratios matter more than absolute figures, which
    depend on the machine. Targets are printed, never enforced.
    """


@bench.command("counters")
@bench_options
def counters_command(**options: Any) -> None:
    """Counters: record, batched record, get, cleanup and memory, webtier vs book."""
    run_bench(counters.TITLE, counters.run, **options)


# -- row cache --------------------------------------------------------------------------


@bench.command("rowcache")
@bench_options
@click.option(
    "--postgres",
    "postgres_url",
    help="SQLAlchemy URL of a PostgreSQL database to measure (its inventory table is "
    "replaced). Default: a PostgreSQL of the bench's own, if PostgreSQL is installed.",
)
def rowcache_command(postgres_url: str | None, **options: Any) -> None:
    """Row cache: refresh from SQLite and PostgreSQL, and cached reads, webtier vs book."""
    run_bench(rowcache.TITLE, functools.partial(rowcache.run, postgres_url=postgres_url), **options)


@bench.command("stats")
@bench_options
def stats_command(**options: Any) -> None:
    """Statistics: update_stats, access_time, histograms, slowest and memory, webtier vs book."""
    run_bench(stats.TITLE, stats.run, **options)


# -- item view ranking -------------------------------------------------------------------


@bench.command("ranking")
@bench_options
def ranking_command(**options: Any) -> None:
    """View ranking: views direct and aggregated, admission checks cached and not, vs book."""
    run_bench(view_ranking.TITLE, view_ranking.run, **options)


# -- page cache ---------------------------------------------------------------------------


@bench.command("pagecache")
@bench_options
def pagecache_command(**options: Any) -> None:
    """Page cache: hits vs the book's cache_request and a bare GET; hits vs 20 ms renders
    through uvicorn; a 200-request stampede."""
    from benchmarks import pagecache

    run_bench(pagecache.TITLE, pagecache.run, **options)


# -- sessions and carts ---


@bench.command("sessions")
@bench_options
@click.option(
    "--frameworks",
    is_flag=True,
    help="Instead: webtier's Django, Flask and Starlette session adapters vs django-redis, "
    "Flask-Session and starsessions: round trips and requests/s of a request that reads "
    "the session and changes one key (one in-process client; --processes is ignored).",
)
@click.option(
    "--served",
    is_flag=True,
    help="With --frameworks: each app behind a real server (gunicorn, uvicorn) driven by "
    "wrk with the session's cookie: requests/s and the server's CPU per request, beside "
    "the framework alone.",
)
def sessions_command(frameworks: bool, served: bool, **options: Any) -> None:
    """Sessions and carts vs the book's listings 2.1-2.5 and 2.9: touch,
    check, cleanup, memory per session; with --frameworks, the framework
    adapters vs the Redis sessions of Django, Flask and Starlette users."""
    if served and not frameworks:
        raise click.UsageError("--served goes with --frameworks")
    if served:
        from benchmarks import session_served

        run_bench(session_served.TITLE, session_served.run, **options)
        return
    if frameworks:
        from benchmarks import session_frameworks

        run_bench(session_frameworks.TITLE, session_frameworks.run, **options)
        return
    run_bench(sessions.TITLE, sessions.run, **options)


# -- Redis Cluster ---


@bench.command("cluster")
@bench_options
def cluster_command(**options: Any) -> None:
    """Every capability's hot operation and a shop's mix on a 3-master Cluster
    vs one server: ops/s, server CPU per operation, each master's share.
    (--url names the single server; the Cluster is the bench's own.)"""
    from benchmarks import cluster

    run_bench(cluster.TITLE, cluster.run, **options)


# -- the asyncio transport ---


@bench.command("transport")
@bench_options
def transport_command(**options: Any) -> None:
    """Client CPU per round trip: webtier's asyncio client vs redis-py's (asyncio,
    pipeline, sync on the loop), 1 and 16 tasks, asyncio and uvloop; AsyncWebTier's
    operations vs the book's listings on redis-py asyncio."""
    from benchmarks import transport

    run_bench(transport.TITLE, transport.run, **options)


# -- capacity ---


@bench.command("capacity")
@bench_options
@click.option(
    "--check",
    is_flag=True,
    help="Also run a small shop and compare its memory, CPU and network with the "
    "model's prediction.",
)
def capacity_command(check: bool, **options: Any) -> None:
    """The measured inputs of webtier size (server CPU and network per operation,
    memory per stored thing), and with --check the model against a run."""
    from benchmarks import capacity

    run_bench(capacity.TITLE, functools.partial(capacity.run, check=check), **options)


# -- the shop, end to end ----------------------------------------------------------------------


@bench.command("shop")
@bench_options
@click.option(
    "--load",
    type=click.Choice(["wrk", "python"]),
    default=None,
    help="The load generator: wrk replaying loadgen's visits (the default when wrk is "
    "installed), or loadgen's Python driver.",
)
@click.option(
    "--requests",
    type=click.IntRange(min=0),
    default=0,
    help="With wrk: each connection stops after this many responses (a fixed amount of "
    "work). Default: --seconds decides.",
)
def shop_command(load: str | None, requests: int, **options: Any) -> None:
    """The demo shop under webtier loadgen's traffic: webtier vs the book's
    listings vs SQL alone, each behind one uvicorn worker, interleaved (and
    with wrk, webtier behind two)."""
    from benchmarks import shop

    run_bench(shop.TITLE, functools.partial(shop.run, load=load, requests=requests), **options)
