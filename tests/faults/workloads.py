"""One workload per capability, for the fault matrix: loads that run while a
fault strikes (sync steps on threads, asyncio steps in one event loop), what
each was told (acknowledged, maybe applied, not applied), and the invariant
checked against Redis once the fault is over.

Each :meth:`Workload.check` returns a :class:`Verdict`: ``violations``
break a guarantee under any fault (a write applied twice, a private page
shared, a 500); ``losses`` are acknowledged writes that did not survive,
which only a failover may cause (Redis replicates asynchronously), and the
matrix records them there instead of failing.
"""

from __future__ import annotations

import itertools
import random
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import flask
import httpx
import sqlalchemy as sa
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from werkzeug.test import Client

import webtier
from tests.faults.harness import Ledger, Loader, eventually
from tests.helpers.rows import seed, set_stock
from tests.helpers.servers import all_keys
from tests.helpers.web import asgi_lifespan
from webtier import ranking
from webtier._core.keys import shard_of
from webtier.config import Config, RetryPolicy
from webtier.errors import UnknownSession
from webtier.pagecache import CacheRoute, PageRules
from webtier.rows.sql import SqlSource
from webtier.sessions.layout import place
from webtier.web import pagecache, sessions, timing
from webtier.web.pagecache import flask as flask_pagecache
from webtier.web.sessions import SessionOptions
from webtier.web.sessions import flask as flask_sessions
from webtier.web.sessions.cookie import encode
from webtier.web.timing import flask as flask_timing

# What each operation of a workload may wait for Redis, retries included:
# the middlewares' default, so a fault costs a step about that at most.
TIME_LIMIT = 1.0


@dataclass
class Verdict:
    violations: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def add(self, found: tuple[list[str], list[str]]) -> None:
        self.violations += found[0]
        self.losses += found[1]


class Env:
    """Where a workload runs: the Redis URL, a key prefix of its own, a
    directory, and which keys the fault strikes (on a Cluster, a workload
    puts its data on the master a failover kills)."""

    def __init__(self, url: str, tmp: Path, on_victim: Callable[[str], bool]) -> None:
        self.url, self.tmp, self.on_victim = url, tmp, on_victim
        self.prefix = f"f{uuid.uuid4().hex[:10]}"
        self._clients: list[Any] = []
        self._aclients: list[Any] = []

    def config(self) -> Config:
        return Config(prefix=self.prefix, retry=RetryPolicy(time_limit=TIME_LIMIT))

    def tier(self) -> webtier.WebTier:
        client = webtier.connect(self.url)
        self._clients.append(client)
        return webtier.WebTier(client, self.config())

    def atier(self) -> webtier.AsyncWebTier:
        """An asyncio tier (make it in the loop that uses it)."""
        client = webtier.connect_async(self.url)
        self._aclients.append(client)
        return webtier.AsyncWebTier(client, self.config())

    async def aclose(self) -> None:
        for client in self._aclients:
            await client.aclose()
        self._aclients.clear()

    def close(self) -> None:
        for client in self._clients:
            webtier.disconnect(client)
        self._clients.clear()

    def pick(self, candidates: Iterable[str], route: Callable[[str], str]) -> str:
        """The first candidate whose data lives where the fault strikes."""
        return next(c for c in candidates if self.on_victim(route(c)))


class Workload:
    capability = ""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.cfg = env.config()

    @staticmethod
    def fixed_route(cfg: Config) -> str | None:
        """A route the workload cannot choose (the ranking's one slot):
        a failover then strikes the master serving it."""
        return None

    def setup(self) -> None:
        """Before the load starts (sync)."""

    async def asetup(self) -> None:
        """In the load's event loop, before its asyncio steps start."""

    async def ateardown(self) -> None:
        await self.env.aclose()

    def loaders(self) -> list[Loader]:
        raise NotImplementedError

    def settle(self) -> None:
        """After the load stopped and Redis recovered: finish what is pending."""

    def check(self) -> Verdict:
        raise NotImplementedError

    def close(self) -> None:
        self.env.close()


def _flush_outcome(report: Any, waiting: int, ledger: Ledger) -> tuple[str, int]:
    """Files one flush of a batching client (a recorder, an aggregator):
    every sum of a flush goes in one request, so all share its fate. Returns
    the step's outcome and what still waits."""
    sent, kept, lost = report.sent, report.kept, report.lost
    if sum(1 for n in (sent, kept, lost) if n) > 1:
        raise AssertionError(f"one request, several fates: {report}")
    if sent:
        ledger.add(acked=waiting)
        return "ok", 0
    if lost:
        ledger.add(unknown=waiting)
        return "unknown", 0
    if kept:
        return "kept", waiting
    return "idle", waiting


# -- counters ----------------------------------------------------------------------------


class Counters(Workload):
    """Increments (sync, asyncio, and the batched recorder): acknowledged <=
    stored <= acknowledged + unknown."""

    capability = "counters"

    def setup(self) -> None:
        self.tier = self.env.tier()
        keys, counters = self.cfg.keys, self.cfg.counters

        def route(name: str) -> str:
            return keys.counter(name, counters.shards, counters.seconds).route

        self.names = {
            kind: self.env.pick((f"{kind}-{n}" for n in itertools.count()), route)
            for kind in ("sync", "async", "recorder")
        }
        self.ledgers = {kind: Ledger() for kind in self.names}
        self.recorder = self.tier.counters.recorder(flush_interval=3600, max_pending=10**9)
        self.waiting = 0  # increments in the recorder, not yet applied

    async def asetup(self) -> None:
        self.atier = self.env.atier()

    def loaders(self) -> list[Loader]:
        return [
            Loader("record", step=self.record),
            Loader("record-async", astep=self.arecord),
            Loader("recorder", step=self.flush),
        ]

    def record(self) -> str:
        with self.ledgers["sync"].write():
            self.tier.counters.record(self.names["sync"])
        return "ok"

    async def arecord(self) -> str:
        with self.ledgers["async"].write():
            await self.atier.counters.record(self.names["async"])
        return "ok"

    def flush(self) -> str:
        for _ in range(5):
            self.recorder.incr(self.names["recorder"])
        self.waiting += 5
        outcome, self.waiting = _flush_outcome(
            self.recorder.flush(), self.waiting, self.ledgers["recorder"]
        )
        return outcome

    def settle(self) -> None:
        def all_sent() -> None:
            _, self.waiting = _flush_outcome(
                self.recorder.flush(), self.waiting, self.ledgers["recorder"]
            )
            if self.waiting:
                raise webtier.RedisUnavailable("sums still kept")

        eventually(all_sent)
        self.recorder.close()

    def check(self) -> Verdict:
        verdict = Verdict()
        for kind, name in self.names.items():
            stored = eventually(lambda n=name: sum(c for _, c in self.tier.counters.get(n, 86400)))
            ledger = self.ledgers[kind]
            verdict.add(ledger.bounds(stored, f"counter {kind}"))
            verdict.figures[kind] = {**ledger.figures(), "stored": stored}
        return verdict


# -- statistics ---------------------------------------------------------------------------


class Stats(Workload):
    """Values recorded (sync and asyncio): the count stored lies between
    the acknowledged and the acknowledged + unknown."""

    capability = "stats"

    def setup(self) -> None:
        self.tier = self.env.tier()
        keys, shards = self.cfg.keys, self.cfg.stats.shards

        def route(context: str) -> str:
            return keys.stats_shard(shard_of(context, shards))

        self.contexts = {
            kind: self.env.pick((f"/{kind}/{n}" for n in itertools.count()), route)
            for kind in ("sync", "async")
        }
        self.ledgers = {kind: Ledger() for kind in self.contexts}

    async def asetup(self) -> None:
        self.atier = self.env.atier()

    def loaders(self) -> list[Loader]:
        return [Loader("record", step=self.record), Loader("record-async", astep=self.arecord)]

    def record(self) -> str:
        with self.ledgers["sync"].write():
            self.tier.stats.record(self.contexts["sync"], "AccessTime", 0.01)
        return "ok"

    async def arecord(self) -> str:
        with self.ledgers["async"].write():
            await self.atier.stats.record(self.contexts["async"], "AccessTime", 0.01)
        return "ok"

    def check(self) -> Verdict:
        verdict = Verdict()
        for kind, context in self.contexts.items():
            # Two periods: the run may straddle the turn of the server's hour.
            stored = eventually(
                lambda c=context: self.tier.stats.get(c, "AccessTime", periods=2).count
            )
            ledger = self.ledgers[kind]
            verdict.add(ledger.bounds(stored, f"stats {kind}"))
            verdict.figures[kind] = {**ledger.figures(), "stored": stored}
        return verdict


# -- item view ranking ------------------------------------------------------------------


class Ranking(Workload):
    """Views counted (sync, asyncio, and the aggregator's flushes): each
    item's score lies between its acknowledged and acknowledged + unknown
    views."""

    capability = "ranking"

    @staticmethod
    def fixed_route(cfg: Config) -> str | None:
        # The shard of the first item, as a Cluster's tier lays the ranking out.
        return ranking.ops.shard_for(cfg.for_client(cluster=True), "item-sync").route

    def setup(self) -> None:
        self.tier = self.env.tier()
        # The aggregator counts every view of its tier in process: a tier of its own.
        self.counting = self.env.tier()
        self.aggregator = self.counting.ranking.aggregator(flush_interval=3600, max_pending=10**9)
        self.items = {kind: f"item-{kind}" for kind in ("sync", "async", "aggregator")}
        self.ledgers = {kind: Ledger() for kind in self.items}
        self.waiting = 0

    async def asetup(self) -> None:
        self.atier = self.env.atier()

    def loaders(self) -> list[Loader]:
        return [
            Loader("view", step=self.view),
            Loader("view-async", astep=self.aview),
            Loader("aggregator", step=self.flush),
        ]

    def view(self) -> str:
        with self.ledgers["sync"].write():
            self.tier.ranking.record_view(self.items["sync"])
        return "ok"

    async def aview(self) -> str:
        with self.ledgers["async"].write():
            await self.atier.ranking.record_view(self.items["async"])
        return "ok"

    def flush(self) -> str:
        for _ in range(5):
            self.aggregator.incr(self.items["aggregator"])
        self.waiting += 5
        outcome, self.waiting = _flush_outcome(
            self.aggregator.flush(), self.waiting, self.ledgers["aggregator"]
        )
        return outcome

    def settle(self) -> None:
        def all_sent() -> None:
            _, self.waiting = _flush_outcome(
                self.aggregator.flush(), self.waiting, self.ledgers["aggregator"]
            )
            if self.waiting:
                raise webtier.RedisUnavailable("views still kept")

        eventually(all_sent)
        self.aggregator.close()

    def check(self) -> Verdict:
        verdict = Verdict()
        scores = dict(eventually(lambda: self.tier.ranking.top(100)))
        for kind, item in self.items.items():
            stored = int(scores.get(item, 0))
            ledger = self.ledgers[kind]
            verdict.add(ledger.bounds(stored, f"views {kind}"))
            verdict.figures[kind] = {**ledger.figures(), "stored": stored}
        return verdict


# -- sessions and carts ---------------------------------------------------------------


@dataclass
class Line:
    """A cart line's count: the last acknowledged, and the ones sent after it
    whose outcome is unknown (any of them may be what is stored)."""

    acked: int = 0
    maybe: set[int] = field(default_factory=set)


class Shopper:
    """The sessions one loader works on, and what it was told about them."""

    def __init__(self) -> None:
        self.live: list[str] = []  # acknowledged, never ended: must be live
        self.dead: list[str] = []  # rotated away by an acknowledged login
        self.lines: dict[str, Line] = {}
        self.lost: list[str] = []  # live sessions found gone
        self.steps = itertools.count()
        self.counts = itertools.count(1)
        self.rng = random.Random(7)


class Sessions(Workload):
    """Sessions created, touched, logged in, their carts set, the cleaner
    run, while the fault strikes: every acknowledged session is live after
    it (no live session deleted), a rotated token is dead, each cart holds
    the count last acknowledged (or one sent after it, outcome unknown)."""

    capability = "sessions"

    def setup(self) -> None:
        self.tier = self.env.tier()
        self.shoppers = {"sync": Shopper(), "async": Shopper()}
        self.users = itertools.count()
        for shopper in self.shoppers.values():
            for _ in range(12):
                shopper.live.append(self.new_on_victim())

    def on_victim(self, token: str) -> bool:
        return self.env.on_victim(place(self.cfg, token).route)

    def new_on_victim(self) -> str:
        while True:
            token = self.tier.sessions.new()
            if self.on_victim(token):
                return token

    async def asetup(self) -> None:
        self.atier = self.env.atier()

    def loaders(self) -> list[Loader]:
        return [Loader("sessions", step=self.step), Loader("sessions-async", astep=self.astep)]

    def _cart(self, shopper: Shopper, token: str, count: int, error: BaseException | None) -> None:
        line = shopper.lines.setdefault(token, Line())
        if error is None:
            line.acked, line.maybe = count, set()
        elif isinstance(error, webtier.OutcomeUnknown):
            line.maybe.add(count)

    def _touched(self, shopper: Shopper, token: str, live: bool) -> str:
        if live:
            return "ok"
        shopper.lost.append(token)
        shopper.live.remove(token)
        return "gone"

    def step(self) -> str:
        shopper, tier = self.shoppers["sync"], self.tier
        i = next(shopper.steps)
        if i % 10 == 0 or not shopper.live:
            shopper.live.append(tier.sessions.new())
            return "ok"
        token = shopper.rng.choice(shopper.live)
        if i % 10 == 5:
            count = next(shopper.counts)
            try:
                tier.carts.set(token, "hat", count)
            except webtier.RedisUnavailable as error:
                self._cart(shopper, token, count, error)
                raise
            except UnknownSession:  # lost with the old master: a loss, counted
                return self._touched(shopper, token, False)
            self._cart(shopper, token, count, None)
            return "ok"
        if i % 25 == 12:
            return self.login(shopper, token)
        if i % 40 == 21:
            tier.sessions.clean()
            return "ok"
        return self._touched(shopper, token, tier.sessions.touch(token, item=f"i{i % 5}"))

    def login(self, shopper: Shopper, token: str) -> str:
        try:
            result = self.tier.sessions.login(token, f"user{next(self.users)}")
        except webtier.OutcomeUnknown:
            # The old token may or may not be dead; the new one is unknown.
            shopper.live.remove(token)
            shopper.lines.pop(token, None)
            raise
        except UnknownSession:
            return self._touched(shopper, token, False)
        shopper.live.remove(token)
        shopper.dead.append(token)
        shopper.live.append(result.token)
        if token in shopper.lines:  # the only session of a new user: the cart moves as it is
            shopper.lines[result.token] = shopper.lines.pop(token)
        return "ok"

    async def astep(self) -> str:
        shopper, tier = self.shoppers["async"], self.atier
        i = next(shopper.steps)
        if i % 10 == 0 or not shopper.live:
            shopper.live.append(await tier.sessions.new())
            return "ok"
        token = shopper.rng.choice(shopper.live)
        if i % 10 == 5:
            count = next(shopper.counts)
            try:
                await tier.carts.set(token, "hat", count)
            except webtier.RedisUnavailable as error:
                self._cart(shopper, token, count, error)
                raise
            except UnknownSession:  # lost with the old master: a loss, counted
                return self._touched(shopper, token, False)
            self._cart(shopper, token, count, None)
            return "ok"
        return self._touched(shopper, token, await tier.sessions.touch(token, item=f"i{i % 5}"))

    def check(self) -> Verdict:
        verdict = Verdict()
        for name, shopper in self.shoppers.items():
            verdict.losses += [f"{name}: live session {t[:8]}... gone" for t in shopper.lost]
            for token in shopper.live:
                if eventually(lambda t=token: self.tier.sessions.info(t)) is None:
                    verdict.losses.append(f"{name}: live session {token[:8]}... gone")
                    continue
                line = shopper.lines.get(token)
                if line is None:
                    continue
                stored = eventually(lambda t=token: self.tier.carts.get(t)).get("hat", 0)
                if stored != line.acked and stored not in line.maybe:
                    wrong = f"{name}: cart holds {stored}, acknowledged {line.acked}"
                    if line.maybe:
                        wrong += f", maybe {sorted(line.maybe)}"
                    (verdict.losses if stored < line.acked else verdict.violations).append(wrong)
            for token in shopper.dead:
                if eventually(lambda t=token: self.tier.sessions.info(t)) is not None:
                    verdict.violations.append(f"{name}: token {token[:8]}... alive after login")
            verdict.figures[name] = {
                "live": len(shopper.live),
                "rotated": len(shopper.dead),
                "carts": len(shopper.lines),
                "lost": len(shopper.lost),
            }
        return verdict


# -- web pages: the page cache and the session and timing middlewares -------------------------


class Catalog:
    """The application's data: the version of the item page, which the
    writer bumps before each invalidation (its "database write")."""

    def __init__(self) -> None:
        self.version = 0


HOSTS = {"flask": "flask.test", "wsgi": "wsgi.test", "asgi": "asgi.test"}  # one app each


def page_rules() -> PageRules:
    return PageRules(routes=(CacheRoute("/"), CacheRoute("/item", item_pages=True)))


def home_text(user: str | None) -> str:
    return "the home page" if user is None else f"home of {user}"


def flask_app(tier: webtier.WebTier, catalog: Catalog) -> Any:
    app = flask.Flask(f"faults-{uuid.uuid4().hex[:6]}")

    @app.get("/")
    def home() -> str:
        return home_text(flask_sessions.current_session().user())

    @app.get("/item")
    def item() -> str:
        return f"item {flask.request.args['item']} v{catalog.version}"

    flask_sessions.install(app, tier, insecure_local_http=True)
    flask_pagecache.install(app, tier, page_rules())
    flask_timing.install(app, tier)
    return app


def wsgi_app(tier: webtier.WebTier, catalog: Catalog) -> Any:
    """A plain WSGI app (no framework) under the same three middlewares."""

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ["PATH_INFO"] == "/item":
            item = parse_qs(environ["QUERY_STRING"])["item"][0]
            body = f"item {item} v{catalog.version}".encode()
        else:
            body = home_text(sessions.session_of(environ).user()).encode()
        start_response(
            "200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
        )
        return [body]

    with_sessions = sessions.WSGIMiddleware(app, tier, insecure_local_http=True)
    return timing.WSGIMiddleware(pagecache.WSGIMiddleware(with_sessions, tier, page_rules()), tier)


def asgi_app(tier: webtier.AsyncWebTier, catalog: Catalog) -> Starlette:
    async def home(request: Request) -> Response:
        return PlainTextResponse(home_text(await request.state.session.user()))

    async def item(request: Request) -> Response:
        return PlainTextResponse(f"item {request.query_params['item']} v{catalog.version}")

    return Starlette(
        routes=[Route("/", home), Route("/item", item)],
        middleware=[
            Middleware(timing.ASGIMiddleware, tier=tier),
            Middleware(pagecache.ASGIMiddleware, tier=tier, rules=page_rules()),
            Middleware(sessions.ASGIMiddleware, tier=tier, insecure_local_http=True),
        ],
    )


class Visitor:
    """Requests of one app in turn: an anonymous visitor's home page (cached),
    a signed-in user's (private: never from the cache), the item page."""

    def __init__(self, pages: WebPages, name: str) -> None:
        self.pages, self.name = pages, name
        self.turn = itertools.count()

    def plan(self) -> tuple[str, dict[str, str], str | None, int]:
        """(path, headers, the user the page is for, the item's floor)."""
        turn = next(self.turn) % 4
        if turn in (0, 2):
            return "/", {}, None, 0
        if turn == 1:
            user = self.pages.users[next(self.turn) % 2]
            return "/", {"cookie": self.pages.cookies[user]}, user, 0
        return f"/item?item={self.pages.item}", {}, None, self.pages.floor

    def judge(
        self, path: str, user: str | None, floor: int, status: int, headers: Any, body: str
    ) -> str:
        cache = headers.get("x-cache")
        if path == "/":
            if status == 503 and user is not None:
                return "503"  # the session is needed and Redis is away
            if status != 200 or body != home_text(user):
                self.pages.wrong(f"{self.name}: {path} for {user}: {status} {body[:60]!r}")
                return "wrong"
            if user is not None:
                if cache is not None:
                    self.pages.wrong(
                        f"{self.name}: a private page went through the cache ({cache})"
                    )
                return "ok"
            return "ok" if cache == "HIT" else "uncached"
        if status != 200 or not body.startswith(f"item {self.pages.item} v"):
            self.pages.wrong(f"{self.name}: {path}: {status} {body[:60]!r}")
            return "wrong"
        version = int(body.rsplit("v", 1)[1])
        if version < floor:
            self.pages.stale(
                f"{self.name}: item page v{version} after v{floor} was invalidated ({cache})"
            )
        return "ok" if cache == "HIT" else "uncached"


class WebPages(Workload):
    """Flask, a plain WSGI app and a Starlette app, each under the session,
    page cache and timing middlewares, visited while the fault strikes;
    a writer changes the item and invalidates its pages. Never a 500, never
    a private page from the cache or in it, never an item page older than
    the last invalidation; the session's pages are 503 while Redis is away."""

    capability = "pagecache"

    def setup(self) -> None:
        self.tier = self.env.tier()
        shards = self.cfg.pagecache.shards
        self.item = self.env.pick(
            (str(n) for n in itertools.count(42)),
            lambda item: self.cfg.keys.page_shard(shard_of(item, shards)).route,
        )
        self.tier.ranking.record_view(self.item)  # admitted: among the most viewed
        self.catalog = Catalog()
        self.floor = 0  # the version whose invalidation was acknowledged
        self.pending = False
        self.users = ("ann", "bob")
        self.cookies = {}
        for user in self.users:
            while True:
                token = self.tier.sessions.new(user=user)
                if self.env.on_victim(place(self.cfg, token).route):
                    break
            self.cookies[user] = f"webtier_session={encode(SessionOptions(), token)}"
        self.violations: list[str] = []
        self.losses: list[str] = []
        self._lock = threading.Lock()
        flask_pages = flask_app(self.tier, self.catalog)
        wsgi_pages = wsgi_app(self.tier, self.catalog)
        # The timing middlewares batch: closed (flushed) in close().
        self.timed = [flask_pages.wsgi_app, wsgi_pages]
        self.flask = Client(flask_pages, use_cookies=False)
        self.wsgi = Client(wsgi_pages, use_cookies=False)
        self.visitors = {name: Visitor(self, name) for name in HOSTS}
        self.rules = page_rules()

    def wrong(self, what: str) -> None:
        with self._lock:
            self.violations.append(what)

    def stale(self, what: str) -> None:
        with self._lock:
            self.losses.append(what)

    async def asetup(self) -> None:
        self.atier = self.env.atier()
        app = asgi_app(self.atier, self.catalog)
        # Served as a server would: the lifespan's shutdown flushes the
        # timing middleware's recorder and ends its task.
        self.lifespan = asgi_lifespan(app)
        await self.lifespan.__aenter__()
        transport = httpx.ASGITransport(app=app)
        self.http = httpx.AsyncClient(transport=transport, base_url=f"http://{HOSTS['asgi']}")

    async def ateardown(self) -> None:
        await self.http.aclose()
        await self.lifespan.__aexit__(None, None, None)
        await super().ateardown()

    def loaders(self) -> list[Loader]:
        return [
            Loader("flask", step=lambda: self.visit(self.flask, "flask")),
            Loader("wsgi", step=lambda: self.visit(self.wsgi, "wsgi")),
            Loader("asgi", astep=self.avisit),
            Loader("invalidate", step=self.write),
        ]

    def visit(self, client: Client, name: str) -> str:
        visitor = self.visitors[name]
        path, headers, user, floor = visitor.plan()
        response = client.get(path, headers=headers, base_url=f"http://{HOSTS[name]}")
        body = response.get_data(as_text=True)
        return visitor.judge(path, user, floor, response.status_code, response.headers, body)

    async def avisit(self) -> str:
        visitor = self.visitors["asgi"]
        path, headers, user, floor = visitor.plan()
        response = await self.http.get(path, headers=headers)
        return visitor.judge(
            path, user, floor, response.status_code, response.headers, response.text
        )

    def write(self) -> str:
        if not self.pending:
            self.catalog.version += 1  # the database write, then the invalidation
            self.pending = True
        # Page by page: invalidate_item can miss a page stored while it runs
        # (tests/faults/test_pagecache_faults.py), which would fail this for that alone.
        for host in HOSTS.values():
            url = f"http://{host}/item?item={self.item}"
            self.tier.pagecache.invalidate(url, None, self.rules)
        self.floor, self.pending = self.catalog.version, False
        return "ok"

    def check(self) -> Verdict:
        verdict = Verdict(list(self.violations), list(self.losses))
        client = webtier.connect(self.env.url)
        try:
            for key in all_keys(self.env.url, f"{self.env.prefix}:*:page:*"):
                copy = eventually(lambda k=key: client.get(k)) or b""
                if b"home of" in copy:
                    verdict.violations.append(f"a private page is in the cache: {key!r}")
        finally:
            webtier.disconnect(client)
        verdict.figures = {"version": self.catalog.version, "floor": self.floor}
        return verdict

    def close(self) -> None:
        for timed in self.timed:
            timed.close()
        super().close()


# -- the row cache ----------------------------------------------------------------------------


class Rows(Workload):
    """A writer updates a row in the database (SQLite here) and invalidates
    it; readers (sync and asyncio, reading through) and a worker (refreshing
    it every 50 ms) run meanwhile: no read returns a version older than the
    last invalidation that returned before it began. While the database is
    down, steps that need it say so ("db-down")."""

    capability = "rows"

    def make_engine(self) -> sa.Engine:
        return sa.create_engine(f"sqlite:///{self.env.tmp / 'shop.db'}")

    def setup(self) -> None:
        self.engine = self.make_engine()
        self.source: SqlSource = seed(self.engine, 50)
        rows = self.cfg.rows

        def route(row: str) -> str:
            return self.cfg.keys.row_shard(self.source.name, shard_of(row, rows.shards)).route

        self.row = int(self.env.pick((str(n) for n in range(1, 51)), route))
        self.tier = self.env.tier()
        self.version = 0
        set_stock(self.engine, self.row, 0)
        self.floor = 0  # the version whose invalidation was acknowledged
        self.pending = False  # a version written (or being written), not yet invalidated
        self.committed = False
        self.tier.rows.schedule(self.source, self.row, 0.05)
        self.stale: list[str] = []
        self.wrong: list[str] = []
        self.reads = 0

    async def asetup(self) -> None:
        self.atier = self.env.atier()

    def loaders(self) -> list[Loader]:
        return [
            Loader("write", step=self.write),
            Loader("read", step=self.read),
            Loader("read-async", astep=self.aread),
            Loader("worker", step=self.refresh),
        ]

    def write(self) -> str:
        if not self.pending:
            self.version += 1
            self.pending, self.committed = True, False
        if not self.committed:
            try:
                set_stock(self.engine, self.row, self.version)  # then committed
            except sa.exc.DBAPIError:
                return "db-down"  # written again (the same version) next time
            self.committed = True
        self.tier.rows.invalidate(self.source, self.row)
        self.floor, self.pending = self.version, False
        return "ok"

    def _judge(self, floor: int, row: dict[str, Any] | None, who: str) -> str:
        self.reads += 1
        if row is None:
            self.wrong.append(f"{who}: no row")
            return "wrong"
        if row["stock"] < floor:
            self.stale.append(f"{who}: version {row['stock']} after {floor} was invalidated")
        return "ok"

    def read(self) -> str:
        floor = self.floor
        try:
            row = self.tier.rows.get(self.source, self.row, load=True)
        except webtier.SourceError:
            return "db-down"
        return self._judge(floor, row, "read")

    async def aread(self) -> str:
        floor = self.floor
        try:
            row = await self.atier.rows.get(self.source, self.row, load=True)
        except webtier.SourceError:
            return "db-down"
        return self._judge(floor, row, "read-async")

    def refresh(self) -> str:
        try:
            self.tier.rows.refresh_due([self.source])
        except webtier.SourceError:
            return "db-down"
        return "ok"

    def check(self) -> Verdict:
        verdict = Verdict(list(self.wrong), list(self.stale))
        copy = eventually(lambda: self.tier.rows.get(self.source, self.row))
        if copy is not None and copy["stock"] < self.floor:
            verdict.losses.append(
                f"the copy holds {copy['stock']} after {self.floor} was invalidated"
            )
        verdict.figures = {"version": self.version, "floor": self.floor, "reads": self.reads}
        return verdict

    def close(self) -> None:
        super().close()
        self.engine.dispose()


CAPABILITIES: dict[str, type[Workload]] = {
    w.capability: w for w in (Counters, Stats, Sessions, Ranking, WebPages, Rows)
}
