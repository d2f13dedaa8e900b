"""``webtier demo``: the shop served in this process, with traffic of its own.

The inventory is made on the first run (a progress bar while its rows are
written) and reused by the next; uvicorn serves the app in this process's
event loop, and the load generator (:mod:`webtier.demo.loadgen`) visits it
as an asyncio task of the same loop. Ctrl-C or ``duration`` stops it warm:
the traffic stops, uvicorn finishes the requests under way, the app's
lifespan flushes its counts and stops its worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
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
    with a progress bar; reused as it is by the next."""
    engine = open_engine(database, create=True)
    shopdb.make_room(engine)
    with engine.connect() as conn:
        present = sa.inspect(conn).has_table("inventory")
    if present:
        with engine.connect() as conn:
            count = conn.scalar(sa.select(sa.func.count()).select_from(shopdb.inventory)) or 0
        if count >= items:
            shopdb.metadata.create_all(engine)  # an inventory from `webtier rows init`: add orders
            return engine
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
    return engine


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
    from webtier.demo.shop import create_app  # Starlette, Jinja2: only once the demo runs
    from webtier.web.dashboard.access import is_loopback

    async with open_async(options.url, config=options.config, data_dir=options.data_dir) as tier:
        # The dashboard here has no credentials: only for this machine's eyes.
        local = is_loopback(options.host)
        settings = ShopSettings(items=options.items, run_jobs=True, dashboard=local)
        app = create_app(tier, engine, settings=settings)
        server = uvicorn.Server(
            uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
        )
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.02)
        if serving.done():
            await serving  # its failure, said once
            return
        host, port = sock.getsockname()[:2]
        url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
        console.print(f"Fake Web Retailer is open at [bold]{url}[/] (Ctrl-C stops it)")
        if local:
            console.print(f"its dashboard: [bold]{url}/dashboard[/]", soft_wrap=True)
            console.print(f"Prometheus metrics: {url}/metrics", soft_wrap=True)
        else:
            console.print(
                "no dashboard beyond loopback without credentials: "
                "run webtier dashboard --token ... beside the shop"
            )
        stop = asyncio.Event()
        traffic = start_traffic(url, options, stop, console) if options.traffic else None
        if options.duration is not None:
            asyncio.get_running_loop().call_later(options.duration, _stop, server)
        try:
            await serving
        finally:
            stop.set()
            if traffic is not None:
                await report(traffic, console)


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
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(options, console))
    console.print(
        "Stopped. Now try: webtier ranking top; webtier stats slowest; webtier sessions stats",
        soft_wrap=True,
    )
