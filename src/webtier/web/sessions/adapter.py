"""What every session adapter (ASGI, WSGI, Django) shares: its options and
outage log, reading a request's cookie into a :class:`SessionState`, the
503, and the header arithmetic."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from webtier.errors import RedisUnavailable
from webtier.web.sessions.options import SessionOptions
from webtier.web.sessions.outage import outage_log, unavailable_headers
from webtier.web.sessions.state import SessionState

if TYPE_CHECKING:
    from webtier.aio import WebTier as AsyncWebTier
    from webtier.sync import WebTier

TierT = TypeVar("TierT", "WebTier", "AsyncWebTier")


class Adapter(Generic[TierT]):
    """The base of the session middlewares: it keeps the options and the
    outage log, reads the request's cookie into a :class:`SessionState`,
    and logs the 503s."""

    def __init__(
        self,
        tier: TierT,
        options: SessionOptions | None,
        settings: Mapping[str, Any],
    ) -> None:
        self.tier: TierT = tier
        self.options = options or SessionOptions(**settings)
        self.outages = outage_log(self.options.log_every)
        # Touch often enough that a session in use never reaches the tier's
        # idle timeout between two touches.
        idle = tier.config.sessions.idle_timeout
        self.refresh_after = min(self.options.refresh_after, idle / 2 if idle else math.inf)

    def state(self, cookie_header: str | None) -> SessionState:
        state = SessionState.from_cookie(self.options, self.outages, cookie_header)
        state.refresh_after = self.refresh_after
        state.views = self.tier.ranking.views
        return state

    def unavailable(self, error: RedisUnavailable) -> list[tuple[str, str]]:
        """Logs the outage; the headers of the 503 (body: UNAVAILABLE_BODY)."""
        self.outages.failed(error, "answered 503")
        return unavailable_headers(self.options)


def header_values(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The ``name`` header of an ASGI request, its repeats joined as RFC 9110 says."""
    found = [value.decode("latin-1") for key, value in headers if key.lower() == name]
    return "; ".join(found) if found else None


def environ_headers(environ: Mapping[str, Any]) -> Iterable[str]:
    """The request's header names, from a WSGI environ (or Django's META)."""
    return (key[5:].replace("_", "-") for key in environ if key.startswith("HTTP_"))


def merge_headers(
    existing: list[tuple[str, str]], extra: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The response's headers with the session's added; the session's
    ``Cache-Control`` replaces the response's own."""
    replaced = {name for name, _ in extra if name == "cache-control"}
    return [(k, v) for k, v in existing if k.lower() not in replaced] + extra
