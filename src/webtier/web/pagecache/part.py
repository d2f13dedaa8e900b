"""The page cache part of webtier's ASGI layer (:mod:`webtier.web.asgi`):
what the cache reads of a scope, the render it stores, and the answer."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from webtier import pagecache, sessions
from webtier._core.deadline import time_limit
from webtier._core.extras import extra_needed
from webtier._core.protocol import Call, Op, together
from webtier.aio import WebTier as AsyncWebTier
from webtier.counters import AsyncRecorder
from webtier.errors import WebtierError
from webtier.pagecache import PageRequest, PageRules, Plan
from webtier.pagecache.holes import Holes, Visit
from webtier.pagecache.request import is_private
from webtier.types import Rendered, Served
from webtier.web.pagecache import policy

with extra_needed("web", "the ASGI page cache"):
    from starlette.types import Message, Receive, Scope, Send


class Visitor(Protocol):
    """What the page cache needs of a request's session: its token (None
    without a live-looking cookie), how it counts views and when a read
    touches it, whether the app read it, and where the hash the page's
    round trip read goes for the app's first read."""

    read_with_page: dict[str, bytes] | None

    @property
    def token(self) -> str | None: ...

    @property
    def loaded(self) -> bool: ...

    @property
    def refresh_after(self) -> float: ...

    @property
    def views(self) -> Any: ...


class Exchange(Protocol):
    """What the page cache needs of one request in the layer."""

    item: str | None  # the item page's item, when its view counts
    visit: Visit  # what the holes of its page are filled with

    @property
    def visitor(self) -> Visitor | None: ...

    async def send(self, message: Message) -> None: ...


class Layer(Protocol):
    """What the page cache needs of the layer it is part of
    (:class:`webtier.web.asgi.ASGIMiddleware`)."""

    item_views: bool
    holes: Holes | None

    def counts(self) -> AsyncRecorder: ...

    async def render(self, scope: Scope, receive: Receive, send: Send, exchange: Any) -> None: ...


def scope_request(scope: Scope) -> PageRequest:
    headers = policy.lower_headers(
        (k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]
    )
    host = headers.get("host")
    if host is None and scope.get("server"):
        server_host, port = scope["server"]
        host = f"{server_host}:{port}"
    return PageRequest(
        scope["method"],
        scope["path"],
        scope.get("query_string", b"").decode("latin-1"),
        scope.get("scheme", "http"),
        host or "",
        headers,
    )


def _no_thread() -> Any:
    raise RuntimeError("an ASGI render runs on the event loop")


class _Render:
    """Runs the app once for the cache: buffers a response that may be
    stored, streams any other straight to the client."""

    def __init__(
        self,
        layer: Layer,
        scope: Scope,
        receive: Receive,
        exchange: Exchange,
        plan: Plan | None,
        settings: Any,
        holes: Holes | None,
    ) -> None:
        self.layer, self.scope, self.receive, self.exchange = layer, scope, receive, exchange
        self.plan, self.settings = plan, settings
        self.result: Rendered | None = None
        # A page with holes is kept whole, to be filled before it goes out.
        self.holes = holes

    async def __call__(self) -> Rendered:
        status = 500
        headers: tuple[tuple[str, str], ...] = ()
        ttl: float | None = None
        through = False
        chunks: list[bytes] = []
        send = self.exchange.send

        async def capture(message: Message) -> None:
            nonlocal status, headers, ttl, through
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = tuple(
                    (k.decode("latin-1"), v.decode("latin-1"))
                    for k, v in message.get("headers", ())
                )
                ttl = None
                if self.plan is not None:
                    ttl = policy.store_ttl(self.settings, self.plan, status, headers)
                if ttl is None and self.holes is None:
                    through = True
                    raw = [*message.get("headers", ()), (b"x-cache", b"MISS")]
                    await send({**message, "headers": raw})
            elif through:
                await send(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            else:  # trailers, pathsend...: not a plain response
                ttl = None

        await self.layer.render(self.scope, self.receive, capture, self.exchange)
        body = b"".join(chunks)
        places: tuple[tuple[int, str], ...] = ()
        personal = False
        if self.holes is not None:
            body, places = self.holes.split(body)
            visitor = self.exchange.visitor
            if visitor is not None and visitor.loaded:
                # The app read the session: its page may hold the visitor's
                # data outside the holes. Answered, never stored.
                ttl = None
            # Not stored, for a visitor with a session: it may be theirs alone
            # (read their session, set their cookie), and say nothing of the
            # page another visitor's render may store (no pass note).
            personal = ttl is None and visitor is not None and visitor.token is not None
        self.result = Rendered(
            status, headers, body, ttl, sent=through, holes=places, personal=personal
        )
        return self.result


class PageCache:
    """The page cache part of webtier's ASGI layer (:mod:`webtier.web.asgi`):
    answers cacheable requests from Redis, renders the others through the
    rest of the layer."""

    def __init__(self, tier: AsyncWebTier, rules: PageRules, holes: Holes | None = None) -> None:
        self.tier = tier
        self.policy = policy.Policy(tier.config, rules, fills_holes=holes is not None)
        # Pages being served in this process, by digest: concurrent requests
        # for one of them wait for its outcome (see serve).
        self._inflight: dict[str, asyncio.Future[Served | None]] = {}
        self.hot = policy.HotPages()

    async def serve(self, layer: Layer, scope: Scope, receive: Receive, exchange: Exchange) -> None:
        request = scope_request(scope)
        plan = self.policy.plan(request)
        if layer.item_views and not is_private(self.policy.settings, request.headers):
            # A view of a visitor without a session: no session's touch
            # counts it (a cached or not, a reload's too).
            # (A plan's item is an item route's when it has an admission.)
            if plan is not None and plan.admission is not None:
                exchange.item = plan.item
            else:
                exchange.item = self.policy.item_of(request)
        if plan is None:
            if layer.holes is not None and self.policy.holes_at(request):
                await self._serve_uncached(layer, scope, receive, exchange, request)
            else:
                await layer.render(scope, receive, exchange.send, exchange)
            return
        holes = layer.holes if plan.holes else None
        render = _Render(layer, scope, receive, exchange, plan, self.policy.settings, holes)
        run = self.tier.transport.run
        limit = self.policy.settings.time_limit
        item = plan.item if layer.item_views else None
        read = None if holes is None else self._visit(exchange, item)
        try:
            with time_limit(limit):
                lookup = pagecache.ops.lookup(self.tier.config, plan)
                if read is None:
                    copy, admission = await run(lookup)
                else:
                    # The page and the visitor's session in one round trip.
                    (copy, admission), fields = await run(together(lookup, read))
                    exchange.visit = policy.visit_of(self.tier.config, fields)
                    if fields is not None and exchange.visitor is not None:
                        # A render of this request reads it from here: no second load.
                        exchange.visitor.read_with_page = fields
        except WebtierError as error:
            self.policy.outage.failed(error)
            uncached = Served("MISS", rendered=await render())
            await self._done(layer, uncached, request, exchange, render)
            return
        if holes is not None and plan.renders(exchange.visit):
            # Their session holds what only a render shows (render_for):
            # rendered for them, filled, never stored.
            rendered = Served("MISS", rendered=await render())
            await self._done(layer, rendered, request, exchange, render)
            return
        if copy is not None:
            hot = self.hot.get(plan.digest, copy)
            if hot is not None and hot.page.fresh(self.tier.config.clock.wall()):
                # A fresh copy (what pagecache.ops.answer would serve): the
                # answer needs nothing more of Redis, nor a second run.
                await self._done(layer, Served("HIT", hot.page), request, exchange, hot=hot)
                return
        leader = self._inflight.get(plan.digest) if copy is None else None
        if leader is not None:
            # The same cold page is being served in this process: share its
            # page rather than queue on Redis (a burst of requests would take
            # a pooled connection each, polling). Only a page is shared,
            # never a response that was not cacheable (it may be one
            # visitor's: a Set-Cookie).
            shared = await asyncio.shield(leader)
            if shared is not None and shared.page is not None:
                await self._done(layer, Served("HIT", shared.page), request, exchange)
                return
        future: asyncio.Future[Served | None] = asyncio.get_running_loop().create_future()
        # Only a render that may be stored leads: another's is its own.
        leading = copy is None and plan.storable and plan.digest not in self._inflight
        if leading:
            self._inflight[plan.digest] = future
        served: Served | None = None
        try:
            with time_limit(limit):
                served = await run(
                    pagecache.ops.answer(
                        self.tier.config, plan, Call(_no_thread, render), copy, admission=admission
                    )
                )
        except WebtierError as error:
            self.policy.outage.failed(error)
            served = Served("MISS", rendered=render.result or await render())
        finally:
            if leading:
                del self._inflight[plan.digest]
            future.set_result(served)
        await self._done(layer, served, request, exchange, render)

    def _visit(self, exchange: Exchange, item: str | None) -> Op[Any] | None:
        """The read of the visitor's session for the holes of their page,
        an item page's view counted for it first; None without a session."""
        visitor = exchange.visitor
        if visitor is None or visitor.token is None:
            return None
        return sessions.ops.visit(
            self.tier.config, visitor.token, visitor.refresh_after, item, visitor.views
        )

    async def _serve_uncached(
        self, layer: Layer, scope: Scope, receive: Receive, exchange: Exchange, request: PageRequest
    ) -> None:
        """A page with holes the cache may not answer (a reload asking for a
        fresh page, a dynamic one): rendered, and filled all the same."""
        # A view is a page read (a form posted to an item's path is not).
        viewed = layer.item_views and request.method in ("GET", "HEAD")
        item = self.policy.item_of(request) if viewed else None
        read = self._visit(exchange, item)
        if read is not None:
            try:
                with time_limit(self.policy.settings.time_limit):
                    fields = await self.tier.transport.run(read)
                exchange.visit = policy.visit_of(self.tier.config, fields)
            except WebtierError as error:  # filled as for a visitor without a session
                self.policy.outage.failed(error)
        render = _Render(layer, scope, receive, exchange, None, self.policy.settings, layer.holes)
        rendered = await render()
        if not rendered.sent:  # left to the app, as a page the cache never plans: no X-Cache
            headers = list(rendered.headers)
            status, headers, body = policy.filled_render(
                rendered, headers, layer.holes, exchange.visit
            )
            await _send(exchange, status, headers, body)

    async def _done(
        self,
        layer: Layer,
        served: Served,
        request: PageRequest,
        exchange: Exchange,
        render: _Render | None = None,
        hot: policy.Prepared | None = None,
    ) -> None:
        rendered = render is not None and render.result is not None
        names = self.policy.counters(served.outcome, rendered)
        if names:
            counts = layer.counts()
            for name in names:
                counts.incr(name)
        await _answer(served, request, exchange, layer.holes, hot)


async def _answer(
    served: Served,
    request: PageRequest,
    exchange: Exchange,
    holes: Holes | None,
    hot: policy.Prepared | None,
) -> None:
    visit = exchange.visit
    if hot is not None:
        status, headers, body = hot.response(
            request.headers, served.outcome, visit=visit, fill=holes
        )
    elif served.page is not None:
        status, headers, body = policy.page_response(
            served.page, request.headers, served.outcome, visit=visit, fill=holes
        )
    else:
        rendered = served.rendered
        assert rendered is not None
        if rendered.sent:
            return
        headers = policy.rendered_response(rendered)[1]
        status, headers, body = policy.filled_render(rendered, headers, holes, visit)
    await _send(exchange, status, headers, body)


async def _send(
    exchange: Exchange, status: int, headers: list[tuple[str, str]], body: bytes
) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    await exchange.send({"type": "http.response.start", "status": status, "headers": raw})
    await exchange.send({"type": "http.response.body", "body": body})
