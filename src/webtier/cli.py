"""The ``webtier`` command (also ``python -m webtier``).

Options shared by every command are declared once, on the group, and read
from the environment here, at the edge: ``--url`` (``WEBTIER_REDIS_URL``),
``--data-dir`` (``WEBTIER_DATA_DIR``), ``--prefix`` (``WEBTIER_PREFIX``).
Without a URL, commands use webtier's embedded redis-server in the data
directory; several webtier processes share it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click

from webtier.bench.cli import bench
from webtier.config import ACCESS_TIME, Config, RowSettings, SessionSettings, StatsSettings
from webtier.connect import open as open_tier
from webtier.embedded import EmbeddedRedis, default_data_dir
from webtier.errors import WebtierError
from webtier.rows_cli import rows
from webtier.rowsource import Source
from webtier.sync import WebTier
from webtier.workers import ColdStop, Worker, jobs_named


@dataclass(frozen=True)
class Edge:
    """What the shared options say: where Redis is and how keys are named."""

    url: str | None
    data_dir: Path | None
    prefix: str
    database: str | None = None  # SQLAlchemy URL of the shop's database

    @contextlib.contextmanager
    def tier(self, *, with_rows: bool = False) -> Iterator[WebTier]:
        """A tier on the Redis of the options; ``with_rows``: with the shop's
        row sources configured (what the worker refreshes)."""
        sources = self.row_sources() if with_rows else ()
        config = Config(prefix=self.prefix, rows=RowSettings(sources=sources))
        try:
            with open_tier(self.url, config=config, data_dir=self.data_dir) as tier:
                yield tier
        except WebtierError as error:
            raise click.ClickException(str(error)) from error

    # -- row cache ----------------------------------------------------------------------
    def database_url(self) -> str:
        """The shop's database: ``--database``, else the demo's SQLite file."""
        return self.database or f"sqlite:///{shop_db_path(self.data_dir)}"

    def row_sources(self) -> tuple[Source, ...]:
        """The shop's inventory, if a database was named or the demo's SQLite
        file exists; else none."""
        if self.database is None and not shop_db_path(self.data_dir).exists():
            return ()
        from webtier import shopdb  # imports SQLAlchemy: only for commands that need it

        return (shopdb.inventory_source(self.database_url()),)


def shop_db_path(data_dir: Path | None) -> Path:
    """The demo shop's SQLite file: ``shop.db`` in ``--data-dir``, else beside
    the embedded redis-server's default data directory."""
    return (data_dir if data_dir is not None else default_data_dir().parent) / "shop.db"


pass_edge = click.make_pass_decorator(Edge)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="WEBTIER_REDIS_URL",
    help="Redis to use: redis://, rediss://, unix:// or redis+cluster://host:port[,...]. "
    "Default: webtier's embedded redis-server.",
)
@click.option(
    "--data-dir",
    envvar="WEBTIER_DATA_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the embedded redis-server keeps its data [default: ~/.local/share/webtier/redis].",
)
@click.option(
    "--prefix", envvar="WEBTIER_PREFIX", default="webtier", show_default=True, help="Key prefix."
)
@click.option(
    "--database",
    envvar="WEBTIER_DATABASE_URL",
    help="SQLAlchemy URL of the shop's database, for the row cache. "
    "Default: shop.db (SQLite) beside the embedded redis-server's data.",
)
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.version_option(package_name="webtier")
@click.pass_context
def main(
    ctx: click.Context,
    url: str | None,
    data_dir: Path | None,
    prefix: str,
    database: str | None,
    verbose: int,
) -> None:
    """webtier: the Redis web tier of Redis in Action, for Python web apps."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    ctx.obj = Edge(url or None, data_dir, prefix, database or None)


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


@main.command()
@click.option("--job", "jobs", multiple=True, help="Run only this job (repeatable). Default: all.")
@click.option("--once", is_flag=True, help="Run every job once, then exit.")
@click.option("--heartbeat", default=5.0, show_default=True, help="Seconds between liveness beats.")
@pass_edge
def worker(edge: Edge, jobs: tuple[str, ...], once: bool, heartbeat: float) -> None:
    """Run the maintenance jobs (counter cleanup...) until stopped."""
    try:
        chosen = jobs_named(jobs)
    except WebtierError as error:
        raise click.BadParameter(str(error), param_hint="--job") from error
    with edge.tier(with_rows=True) as tier:
        runner = Worker(tier, chosen, heartbeat=heartbeat, once=once)
        click.echo(f"worker {runner.id}: {', '.join(j.name for j in chosen)}", err=True)
        try:
            with stop_on_signals(runner.request_stop, runner.request_force_stop):
                runner.run()
        except ColdStop:
            click.echo("stopped at once", err=True)
            sys.exit(1)


@main.command()
@pass_edge
def workers(edge: Edge) -> None:
    """List the workers that are alive."""
    with edge.tier() as tier:
        for info in tier.workers.alive():
            age = time.time() - info.beat
            jobs = ", ".join(info.jobs)
            click.echo(
                f"{info.id}  pid {info.pid} on {info.host}  jobs: {jobs}  beat {age:.0f} s ago"
            )


@main.command()
@click.option(
    "--duration", type=float, help="Stop after this many seconds (default: until Ctrl-C)."
)
@click.option("--rate", default=200.0, show_default=True, help="Simulated page views per second.")
@pass_edge
def demo(edge: Edge, duration: float | None, rate: float) -> None:
    """Simulated shop traffic recorded into counters, shown live."""
    from webtier.demo import run_demo

    with edge.tier() as tier:
        run_demo(tier, duration=duration, rate=rate)


@main.command()
@pass_edge
def server(edge: Edge) -> None:
    """Run the embedded redis-server in the foreground, for other processes."""
    with EmbeddedRedis(edge.data_dir) as embedded:
        role = "started" if embedded.owner else "already running"
        click.echo(f"{role}: export WEBTIER_REDIS_URL={embedded.url}")
        if not embedded.owner:
            return
        stop = threading.Event()
        with stop_on_signals(stop.set), contextlib.suppress(ColdStop):
            stop.wait()


main.add_command(bench)
main.add_command(rows)


@main.group()
def counters() -> None:
    """Read the time-series counters."""


@counters.command("list")
@click.argument("prefix", required=False)
@pass_edge
def counters_list(edge: Edge, prefix: str | None) -> None:
    """Names of the counters with data, optionally only those starting with PREFIX."""
    with edge.tier() as tier:
        for name in tier.counters.names(prefix):
            click.echo(name)


@counters.command("show")
@click.argument("name")
@click.option(
    "--precision", type=int, default=60, show_default=True, help="Slice length in seconds."
)
@pass_edge
def counters_show(edge: Edge, name: str, precision: int) -> None:
    """Samples of counter NAME at one precision, oldest first."""
    with edge.tier() as tier:
        try:
            samples = tier.counters.get(name, precision)
        except WebtierError as error:
            raise click.ClickException(str(error)) from error
        for start, count in samples:
            click.echo(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(start))}  {count}")


# -- statistics ------------------------------------------------------------------------------


@main.group()
@click.option(
    "--period", default=3600, show_default=True, help="Seconds per record, as the app set it."
)
@click.option("--shards", default=64, show_default=True, help="Shards, as the app set them.")
@click.pass_context
def stats(ctx: click.Context, period: int, shards: int) -> None:
    """Read the statistics (access times and others)."""
    try:
        ctx.obj = (ctx.find_object(Edge), StatsSettings(period=period, shards=shards))
    except WebtierError as error:
        raise click.BadParameter(str(error)) from error


@contextlib.contextmanager
def _stats_tier(ctx: click.Context) -> Iterator[WebTier]:
    edge, settings = ctx.obj
    with edge.tier() as tier:
        yield WebTier(tier.client, dataclasses.replace(tier.config, stats=settings))


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


@stats.command("show")
@click.argument("context")
@click.option("--type", "stat_type", default=ACCESS_TIME, show_default=True)
@click.option("--periods", default=1, show_default=True, help="Newest periods to merge.")
@click.option("--each", is_flag=True, help="One line per period instead of merged.")
@click.pass_context
def stats_show(ctx: click.Context, context: str, stat_type: str, periods: int, each: bool) -> None:
    """Count, mean, spread, extremes and percentiles of one CONTEXT."""
    with _stats_tier(ctx) as tier:
        try:
            if each:
                summaries = tier.stats.series(context, stat_type, periods)
            else:
                summaries = [tier.stats.get(context, stat_type, periods)]
        except WebtierError as error:
            raise click.ClickException(str(error)) from error
    for s in summaries:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.start))
        percentiles = "  ".join(f"p{p} {_figure(s.percentile(p))}" for p in (50, 90, 95, 99))
        click.echo(
            f"{started}  count {s.count}  errors {s.errors}  mean {_figure(s.mean)}  "
            f"stddev {_figure(s.stddev)}  min {_figure(s.min)}  max {_figure(s.max)}  "
            f"{percentiles}"
        )


@stats.command("slowest")
@click.option("-n", "count", default=20, show_default=True, help="How many contexts.")
@click.option("--periods", default=1, show_default=True, help="Newest periods to merge.")
@click.option("--by", default="mean", show_default=True, help="mean, max, or p50, p95, p99...")
@click.pass_context
def stats_slowest(ctx: click.Context, count: int, periods: int, by: str) -> None:
    """The slowest contexts by access time, slowest first."""
    with _stats_tier(ctx) as tier:
        try:
            ranked = tier.stats.slowest(count, periods=periods, by=by)
        except WebtierError as error:
            raise click.ClickException(str(error)) from error
    for context, score in ranked:
        click.echo(f"{score:12.6f}  {context}")


# -- item view ranking -------------------------------------------------------------------


@main.group()
def ranking() -> None:
    """Read the item view ranking."""


@ranking.command("top")
@click.option("-n", "count", default=20, show_default=True, help="How many items.")
@pass_edge
def ranking_top(edge: Edge, count: int) -> None:
    """The most viewed items with their (rescaled) view counts, most viewed first."""
    with edge.tier() as tier:
        try:
            ranked = tier.ranking.top(count)
        except WebtierError as error:
            raise click.ClickException(str(error)) from error
    for place, (item, views) in enumerate(ranked):
        click.echo(f"{place:6d}  {views:12.2f}  {item}")


@ranking.command("rank")
@click.argument("item")
@pass_edge
def ranking_rank(edge: Edge, item: str) -> None:
    """ITEM's place in the ranking (0 = most viewed), or "not ranked"."""
    with edge.tier() as tier:
        try:
            place = tier.ranking.rank(item)
        except WebtierError as error:
            raise click.ClickException(str(error)) from error
    click.echo("not ranked" if place is None else str(place))


# -- sessions and carts ------------------------------------------------------------------------


@main.group()
@click.option("--shards", default=64, show_default=True, help="Shards, as the app set them.")
@click.pass_context
def sessions(ctx: click.Context, shards: int) -> None:
    """Inspect and clean the session store."""
    try:
        ctx.obj = (ctx.find_object(Edge), SessionSettings(shards=shards))
    except WebtierError as error:
        raise click.BadParameter(str(error)) from error


@contextlib.contextmanager
def _sessions_tier(ctx: click.Context) -> Iterator[WebTier]:
    edge, settings = ctx.obj
    with edge.tier() as tier:
        try:
            yield WebTier(tier.client, dataclasses.replace(tier.config, sessions=settings))
        except WebtierError as error:
            raise click.ClickException(str(error)) from error


def _when(seconds: float | None) -> str:
    return "-" if seconds is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


@sessions.command("stats")
@click.pass_context
def sessions_stats(ctx: click.Context) -> None:
    """How many sessions there are, and when the oldest and newest were seen."""
    with _sessions_tier(ctx) as tier:
        found = tier.sessions.stats()
    click.echo(
        f"{found.sessions} sessions (busiest shard {found.busiest_shard}); "
        f"oldest seen {_when(found.oldest)}, newest seen {_when(found.newest)}"
    )


@sessions.command("clean")
@click.option(
    "--limit", type=click.IntRange(min=0), default=10_000_000, show_default=True,
    help="Keep this many sessions, the most recently seen.",
)  # fmt: skip
@click.pass_context
def sessions_clean(ctx: click.Context, limit: int) -> None:
    """One cleaner pass: remove the least recently seen sessions beyond --limit."""
    with _sessions_tier(ctx) as tier:
        report = tier.sessions.clean(limit=limit)
    click.echo(
        f"{report.deleted} removed, {report.spared} spared (touched meanwhile), "
        f"{report.remaining} left, in {report.seconds:.3f} s"
    )


@sessions.command("user")
@click.argument("user")
@click.option("--revoke-all", is_flag=True, help="End every session of USER.")
@click.pass_context
def sessions_user(ctx: click.Context, user: str, revoke_all: bool) -> None:
    """List USER's sessions (public id, created, last seen), or end them all."""
    with _sessions_tier(ctx) as tier:
        if revoke_all:
            click.echo(f"{tier.sessions.revoke_all(user)} sessions ended")
            return
        for session in tier.sessions.of_user(user):
            click.echo(
                f"{session.id}  created {_when(session.created)}  seen {_when(session.last_seen)}"
            )
