"""What the dashboard may change, only with ``allow_actions`` (and then
behind the CSRF check): purging cached pages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request

from webtier.aio import WebTier
from webtier.errors import InvalidInput
from webtier.pagecache import PageRules


def purge(rules: PageRules | None) -> Callable[[WebTier, Request], Awaitable[dict[str, Any]]]:
    """Drops the cached page of a ``url``, or every cached page of an ``item``
    (a JSON body with one of them)."""

    async def handler(tier: WebTier, request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise InvalidInput(
                "body", 'must be JSON: {"url": ...} or {"item": ...}', None
            ) from None
        if not isinstance(body, dict):
            raise InvalidInput("body", "must be a JSON object", body)
        if "item" in body:
            dropped = await tier.pagecache.invalidate_item(body["item"])
            return {"item": body["item"], "dropped": dropped}
        url = body.get("url")
        if not isinstance(url, str):
            raise InvalidInput("url", "must be the page's URL", url)
        await tier.pagecache.invalidate(url, rules=rules)
        return {"url": url, "dropped": 1}

    return handler
