"""Timing middleware for ASGI apps (Starlette, FastAPI), over an asyncio tier::

    from webtier.web import timing

    app.add_middleware(timing.ASGIMiddleware, tier=async_tier)

The context is the matched Starlette route's *template* (``/item/{id}``),
with mount prefixes; other ASGI frameworks pass ``route=``, a function of
the scope after the app ran. The time runs from the request's arrival to its
last body chunk being handed to the server: streamed responses are timed
whole. See :mod:`webtier.web.timing`.

By default the durations are batched (``batched=True``): each request adds
its own to an in-process recorder, flushed every ``flush_interval`` seconds
with one script call per route, instead of a round trip per request. The
recorder is created on the first request, in the server's event loop, and
flushed when the lifespan's shutdown arrives, before the app's own shutdown
runs; an app run without a lifespan calls
``await middleware.aclose()`` before its loop ends (what is not flushed by
then is lost, as with a crash).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from webtier._core.extras import extra_needed
from webtier.web.timing.core import FLUSH_INTERVAL, UNMATCHED, TimingOptions

with extra_needed("web", "the access time middleware"):
    from starlette.types import ASGIApp, Scope

    from webtier.web.asgi import ASGIMiddleware as Layer

if TYPE_CHECKING:
    from webtier.aio import WebTier as AsyncWebTier
    from webtier.stats import AsyncStatsRecorder


class ASGIMiddleware(Layer):
    """webtier's ASGI layer with access time alone: each HTTP request's
    duration as the ``AccessTime`` of its route's template, on an asyncio
    tier, batched in process by default, or one round trip per request
    (``batched=False``)."""

    def __init__(
        self,
        app: ASGIApp,
        tier: AsyncWebTier,
        *,
        route: Callable[[Scope], str | None] | None = None,
        unmatched: str = UNMATCHED,
        time_limit: float | None = 1.0,
        batched: bool = True,
        flush_interval: float = FLUSH_INTERVAL,
    ) -> None:
        options = TimingOptions(unmatched, time_limit, batched, flush_interval)
        super().__init__(app, tier, timing=options, route=route)

    @property
    def recorder(self) -> AsyncStatsRecorder | None:
        """The recorder batching the durations, once a request created it."""
        assert self.timer is not None
        return self.timer.recorder
