"""``webtier demo``: the shop served in this process, with traffic of its own.

The inventory is made on the first run (a progress bar while its rows are
written) and reused by the next; uvicorn serves the app in this process's
event loop, and the load generator (:mod:`webtier.demo.loadgen`) visits it
as an asyncio task of the same loop. Ctrl-C or ``duration`` stops it warm:
the traffic stops, uvicorn finishes the requests under way, the app's
lifespan flushes its counts and stops its worker.

With ``workers`` > 1 the shop is served as people deploy it: that many
processes accept on one listening socket (the kernel spreads the
connections), each with its own event loop (uvloop where installed) and
connections to Redis; the first runs the maintenance jobs, and this
process only starts them, sends the traffic and stops them.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import multiprocessing
import os
import secrets
import signal
import socket
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from webtier._core.extras import extra_needed
from webtier.config import Config
from webtier.connect import open_async
from webtier.demo import shopdb
from webtier.demo.shop import ShopSettings
from webtier.errors import ConfigError
from webtier.rows.sql import open_engine, shown

with extra_needed("shop", "the demo shop"):
    import sqlalchemy as sa
    import uvicorn
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from webtier.web.dashboard.access import is_loopback

USERS = 5_000  # usernames the demo's visitors log in with


@dataclass(frozen=True)
class DemoOptions:
    """What ``webtier demo`` was asked for."""

    url: str | None  # Redis; None: the embedded server in data_dir
    data_dir: Any
    database: str  # SQLAlchemy URL of the shop's database
    config: Config
    host: str = "127.0.0.1"
    port: int = 8000  # 0: a free one
    items: int = 100_000
    rate: float = 20.0  # visitors a second of the self-traffic
    traffic: bool = True
    duration: float | None = None  # seconds; None: until Ctrl-C
    workers: int = 1  # processes serving the shop


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or one line saying why not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise ConfigError(f"--host {host!r}: not an address of this machine ({error})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is taken: give another --port, or --port 0 for a free one"
            ) from None
        raise ConfigError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    sock.listen(2048)
    return sock


def prepare_database(database: str, items: int, console: Console) -> sa.Engine:
    """The shop's database with items 1..``items``: made on the first run,
    with a progress bar; reused as it is by the next. The engine returned
    never creates a file: one moved away while the shop runs is a 503 until
    it is back, not a new empty database."""
    made = open_engine(database, create=True)
    try:
        _fill(made, items, console)
    finally:
        made.dispose()
    return open_engine(database)


def _fill(engine: sa.Engine, items: int, console: Console) -> None:
    shopdb.make_room(engine)
    with engine.connect() as conn:
        present = sa.inspect(conn).has_table("inventory")
    if present:
        with engine.connect() as conn:
            count = conn.scalar(sa.select(sa.func.count()).select_from(shopdb.inventory)) or 0
        if count >= items:
            shopdb.create_tables(engine)  # an inventory from `webtier rows init`: add orders
            return
    with Progress(
        TextColumn("creating the shop's items"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("items", total=items)
        shopdb.create(engine, items, progress=lambda added: progress.advance(task, added))
    console.print(f"{items:,} items in {shown(engine.url)}")


async def serve(options: DemoOptions, console: Console) -> None:
    """Serve the shop until Ctrl-C or ``options.duration``."""
    with contextlib.closing(bind(options.host, options.port)) as sock:
        engine = prepare_database(options.database, options.items, console)
        try:
            await _serve(options, console, sock, engine)
        finally:
            engine.dispose()


async def _serve(
    options: DemoOptions, console: Console, sock: socket.socket, engine: sa.Engine
) -> None:
    # The tier of this process holds the embedded server (when no URL was
    # given) for as long as the shop runs, whichever process serves it.
    async with open_async(options.url, config=options.config, data_dir=options.data_dir) as tier:
        if options.workers == 1:
            server = uvicorn.Server(_uvicorn_config(_app(tier, engine, options, run_jobs=True)))
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started and not serving.done():
                await asyncio.sleep(0.02)
            if serving.done():
                await serving  # its failure, said once
                return
            stop: Callable[[], None] = functools.partial(_stop, server)
        else:
            workers = Workers(options, sock)
            serving = asyncio.create_task(workers.serve())
            if not await workers.started(serving):
                await serving
                return
            stop = workers.stop
        url = _url_of(sock)
        console.print(f"Fake Web Retailer is open at [bold]{url}[/] (Ctrl-C stops it)")
        if options.workers > 1:
            console.print(f"served by {options.workers} worker processes")
        if is_loopback(options.host):
            console.print(f"its dashboard: [bold]{url}/dashboard[/]", soft_wrap=True)
            console.print(f"Prometheus metrics: {url}/metrics", soft_wrap=True)
        else:
            console.print(
                "no dashboard beyond loopback without credentials: "
                "run webtier dashboard --token ... beside the shop"
            )
        stopping = asyncio.Event()
        traffic = start_traffic(url, options, stopping, console) if options.traffic else None
        if options.duration is not None:
            asyncio.get_running_loop().call_later(options.duration, stop)
        try:
            await serving
        finally:
            stopping.set()
            if traffic is not None:
                await report(traffic, console)


def _app(
    tier: Any,
    engine: sa.Engine,
    options: DemoOptions,
    *,
    run_jobs: bool,
    secret: bytes | None = None,
) -> Any:
    from webtier.demo.shop import create_app  # Starlette, Jinja2: only once the demo runs

    # The dashboard here has no credentials: only for this machine's eyes.
    settings = ShopSettings(
        items=options.items, run_jobs=run_jobs, dashboard=is_loopback(options.host), secret=secret
    )
    return create_app(tier, engine, settings=settings)


def _uvicorn_config(app: Any) -> uvicorn.Config:
    return uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)


def _url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{host if ':' not in host else f'[{host}]'}:{port}"


class Workers:
    """The shop served by ``options.workers`` processes on one socket.

    Spawned, not forked: a fork would copy this process's event loop and
    Redis connections, which the children must never use. They share one
    secret, so a session's cookie and form tokens are good in every one."""

    def __init__(self, options: DemoOptions, sock: socket.socket) -> None:
        context = multiprocessing.get_context("spawn")
        secret = secrets.token_bytes(32)
        self.processes = [
            context.Process(
                target=_worker,
                args=(options, sock, secret, index == 0),
                name=f"webtier-demo-worker-{index}",
                daemon=True,
            )
            for index in range(options.workers)
        ]
        self.url = _url_of(sock)
        self.over = asyncio.Event()

    async def serve(self) -> None:
        """Run the workers until :meth:`stop` (or Ctrl-C, which the
        terminal sends them too); then wait for each to finish warm."""
        loop = asyncio.get_running_loop()
        # Started with Ctrl-C ignored, which a new process keeps until its
        # _worker runs: the terminal's Ctrl-C reaches the whole group, and
        # one still starting (importing) would end with a traceback. Such a
        # process ends by the SIGTERM below instead.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for process in self.processes:
                process.start()
        finally:
            signal.signal(signal.SIGINT, previous)
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self.stop)
        try:
            await self.over.wait()
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
            for process in self.processes:
                if process.is_alive() and process.pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGTERM)
            for process in self.processes:
                await asyncio.to_thread(process.join)

    def stop(self) -> None:
        self.over.set()

    async def started(self, serving: asyncio.Task[None]) -> bool:
        """True once the shop answers; False if the workers ended first."""
        import httpx  # the shop extra's: only once the demo runs

        async with httpx.AsyncClient(base_url=self.url, timeout=2) as client:
            while not serving.done():
                if not all(process.is_alive() for process in self.processes if process.pid):
                    self.stop()
                    return False
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/healthz")).status_code == 200:
                        return True
                await asyncio.sleep(0.05)
        return False


def _worker(options: DemoOptions, sock: socket.socket, secret: bytes, run_jobs: bool) -> None:
    """One worker process: the shop on ``sock`` until SIGINT or SIGTERM."""
    # uvicorn stops warm on either, then raises it again once stopped: as
    # KeyboardInterrupt both, so that this process ends as warmly. (Ctrl-C
    # was ignored while the process started: see Workers.serve.)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=fast_loop()) as run:
        run.run(_serve_worker(options, sock, secret, run_jobs))


async def _serve_worker(
    options: DemoOptions, sock: socket.socket, secret: bytes, run_jobs: bool
) -> None:
    engine = open_engine(options.database)
    try:
        async with open_async(
            options.url, config=options.config, data_dir=options.data_dir
        ) as tier:
            app = _app(tier, engine, options, run_jobs=run_jobs, secret=secret)
            await uvicorn.Server(_uvicorn_config(app)).serve(sockets=[sock])
    finally:
        engine.dispose()


def fast_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (uvicorn's standard
    extras bring it), else asyncio's."""
    try:
        import uvloop
    except ModuleNotFoundError:
        return None
    return uvloop.new_event_loop


def _stop(server: uvicorn.Server) -> None:
    server.should_exit = True


def start_traffic(
    url: str, options: DemoOptions, stop: asyncio.Event, console: Console
) -> asyncio.Task[Any] | None:
    """The load generator's visitors, as a task of this loop."""
    try:
        from webtier.demo.loadgen import drive
    except ModuleNotFoundError as error:
        if error.name != "webtier.demo.loadgen":
            raise
        console.print("traffic: the load generator is not installed here; browse on your own")
        return None
    console.print(
        f"traffic: about {options.rate:g} visitors a second "
        "(--rate to change it, --no-traffic to browse alone)"
    )
    return asyncio.create_task(
        drive(url, rate=options.rate, duration=None, users=USERS, stop=stop, items=options.items)
    )


async def report(traffic: asyncio.Task[Any], console: Console) -> None:
    """One line on what the traffic did, once it has stopped."""
    try:
        done = await traffic
    except asyncio.CancelledError:
        return
    except Exception as error:  # the shop stopped under it: say so, once
        console.print(f"traffic stopped: {error}")
        return
    console.print(
        f"traffic: {done.requests:,} requests ({done.requests_per_second:,.0f}/s), "
        f"{done.checkouts:,} orders, {done.status('5xx')} server errors"
    )


def run(options: DemoOptions) -> None:
    """``webtier demo``: serve the shop until Ctrl-C (exit 0) or the duration."""
    console = Console()
    main: Coroutine[Any, Any, None] = serve(options, console)
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=fast_loop()) as go:
        go.run(main)
    console.print(
        "Stopped. Now try: webtier ranking top; webtier stats slowest; webtier sessions stats",
        soft_wrap=True,
    )
