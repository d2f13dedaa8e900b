"""What the shop counts around its pages: hits per page and anonymous views.

Both sit outside the page cache, so pages it answers count too. A page is
named by its route template (``/item/{item_id}``), never its raw path:
100,000 item pages are one counter, and no visitor can make new counter
names by asking for made-up paths.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from webtier.aio import WebTier as AsyncWebTier
from webtier.counters import AsyncRecorder
from webtier.demo.shop.settings import SESSION_COOKIE
from webtier.errors import WebtierError
from webtier.web.sessions.adapter import header_values
from webtier.web.timing.asgi import starlette_route
from webtier.web.timing.core import UNMATCHED

log = logging.getLogger("webtier.shop")

HITS = "hits:"  # counter names: hits:<route template>, and hits:all
ITEM_ROUTE = "/item/{item_id}"


def route_of(routes: Sequence[BaseRoute]) -> Callable[[Scope], str | None]:
    """The route template of a request, also when the page cache answered it
    and the app never ran (no router in the scope): matched here."""

    def template(scope: Scope) -> str | None:
        found = starlette_route(scope)
        if found is not None:
            return found
        for route in routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return str(getattr(route, "path_format", UNMATCHED))
        return None

    return template


class Observer:
    """Counts every response in ``hits:<route template>`` (a batched
    recorder: one write per flush, not per hit), and counts a view of an
    item page answered to a visitor without a session in the ranking
    (visitors with a session have theirs counted by the session's touch)."""

    def __init__(
        self, app: ASGIApp, tier: AsyncWebTier, route: Callable[[Scope], str | None]
    ) -> None:
        self.app, self.tier, self.route = app, tier, route
        self.recorder: AsyncRecorder | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            template = self.route(scope) or UNMATCHED
            self.count(template)
            if template == ITEM_ROUTE and status == 200 and not _has_session(scope):
                try:
                    await self.tier.ranking.record_view(scope["path"].rsplit("/", 1)[1])
                except WebtierError as error:  # a lost view must not fail a served page
                    log.warning("a view was not counted: %s", error)

    def count(self, template: str) -> None:
        if self.recorder is None:  # made on first use: it needs the running loop
            self.recorder = self.tier.counters.recorder()
        self.recorder.incr(HITS + template)
        self.recorder.incr(HITS + "all")

    async def aclose(self) -> None:
        """Flush the counts (at shutdown)."""
        if self.recorder is not None:
            await self.recorder.aclose()
            self.recorder = None


def _has_session(scope: Scope) -> bool:
    cookies = header_values(scope.get("headers", []), b"cookie") or ""
    return any(crumb.strip().startswith(SESSION_COOKIE + "=") for crumb in cookies.split(";"))
