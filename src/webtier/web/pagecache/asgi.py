"""Page cache ASGI middleware (Starlette, FastAPI, any ASGI app).

::

    from webtier.web import pagecache

    app.add_middleware(pagecache.ASGIMiddleware, tier=async_tier, rules=PageRules(
        routes=(CacheRoute("/", vary=("accept-language",)),)))

Put it outermost (before compression middleware: it compresses what it
stores itself). Requests the rules leave alone go straight to the app. Others
are answered from Redis (``X-Cache: HIT`` or ``STALE``), or rendered once
across every process and stored when the response allows it (``MISS``).
Responses that are not stored (and streamed ones) go through untouched but
for ``X-Cache: MISS``. Concurrent requests for one page in one process share
the page the first one gets (across processes, a lock in Redis does it).
When Redis is unavailable the app renders every request and the outage is
logged once per interval. HEAD requests are left to the app.
"""

from __future__ import annotations

import asyncio
from typing import Any

from webtier import pagecache
from webtier._core.deadline import time_limit
from webtier._core.extras import extra_needed
from webtier._core.protocol import Call
from webtier.aio import WebTier as AsyncWebTier
from webtier.counters import AsyncRecorder
from webtier.errors import WebtierError
from webtier.pagecache import PageRequest, PageRules, Plan
from webtier.types import CacheStatus, Rendered, Served
from webtier.web.pagecache import policy

with extra_needed("web", "the ASGI page cache"):
    from starlette.types import ASGIApp, Message, Receive, Scope, Send


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
        self, app: ASGIApp, scope: Scope, receive: Receive, send: Send, plan: Plan, settings: Any
    ) -> None:
        self.app, self.scope, self.receive, self.send = app, scope, receive, send
        self.plan, self.settings = plan, settings
        self.result: Rendered | None = None

    async def __call__(self) -> Rendered:
        status = 500
        headers: tuple[tuple[str, str], ...] = ()
        ttl: float | None = None
        through = False
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            nonlocal status, headers, ttl, through
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = tuple(
                    (k.decode("latin-1"), v.decode("latin-1"))
                    for k, v in message.get("headers", ())
                )
                ttl = policy.store_ttl(self.settings, self.plan, status, headers)
                if ttl is None:
                    through = True
                    raw = [*message.get("headers", ()), (b"x-cache", b"MISS")]
                    await self.send({**message, "headers": raw})
            elif through:
                await self.send(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            else:  # trailers, pathsend...: not a plain response
                ttl = None

        await self.app(self.scope, self.receive, capture)
        self.result = Rendered(status, headers, b"".join(chunks), ttl, sent=through)
        return self.result


class ASGIMiddleware:
    """ASGI middleware answering cacheable requests from the page cache."""

    def __init__(self, app: ASGIApp, tier: AsyncWebTier, rules: PageRules) -> None:
        self.app, self.tier = app, tier
        self.policy = policy.Policy(tier.config, rules)
        self._recorder: AsyncRecorder | None = None
        # Pages being served in this process, by digest: concurrent requests
        # for one of them wait for its outcome (see __call__).
        self._inflight: dict[str, asyncio.Future[Served | None]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = scope_request(scope)
        plan = self.policy.plan(request)
        if plan is None:
            await self.app(scope, receive, send)
            return
        render = _Render(self.app, scope, receive, send, plan, self.policy.settings)
        run = self.tier.transport.run
        limit = self.policy.settings.time_limit
        try:
            with time_limit(limit):
                copy, admission = await run(pagecache.ops.lookup(self.tier.config, plan))
        except WebtierError as error:
            self.policy.outage.failed(error)
            await self._done(Served("MISS", rendered=await render()), request, send, render)
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
                await self._done(Served("HIT", shared.page), request, send)
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
        await self._done(served, request, send, render)

    async def _done(
        self, served: Served, request: PageRequest, send: Send, render: _Render | None = None
    ) -> None:
        self._count(served.outcome, render is not None and render.result is not None)
        await self._answer(served, request, send)

    async def _answer(self, served: Served, request: PageRequest, send: Send) -> None:
        if served.page is not None:
            status, headers, body = policy.page_response(
                served.page, request.headers, served.outcome
            )
        else:
            assert served.rendered is not None
            if served.rendered.sent:
                return
            status, headers, body = policy.rendered_response(served.rendered)
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": body})

    def _count(self, outcome: CacheStatus, rendered: bool) -> None:
        names = self.policy.counters(outcome, rendered)
        if not names:
            return
        if self._recorder is None:  # made on first use: it needs the running loop
            self._recorder = self.tier.counters.recorder()
        for name in names:
            self._recorder.incr(name)

    async def aclose(self) -> None:
        """Flush the hit/miss counts (call at shutdown)."""
        if self._recorder is not None:
            await self._recorder.aclose()
            self._recorder = None
