"""One request's view of its session, and the headers it adds to the response."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import Morsel
from typing import Literal

from webtier._core.throttle import OutageLog
from webtier.errors import RedisUnavailable
from webtier.sessions.layout import ViewCounting
from webtier.web.sessions.cookie import Where, cookie_morsel, decode, encode
from webtier.web.sessions.options import SessionOptions


@dataclass
class SessionState:
    """One request's view of its session."""

    options: SessionOptions
    outages: OutageLog
    token: str | None  # the cookie's token (checked shape and signature), or the new one
    refresh_after: float = 60.0  # seconds: a read of a session idle this long touches it
    # How a touch counts the viewed item for the ranking: the tier's
    # (tier.ranking.views), so an open aggregator counts web views too.
    views: ViewCounting | None = None
    cookie_came: bool = False  # a cookie of ours came with the request
    resign: bool = False  # it was signed with an older key
    loaded: bool = False
    user: str | None = None
    # The session's hash as loaded (one round trip: flows.load), which every
    # read of the request answers from and every write of the request updates
    # (read-your-writes); None before the load. A login's move hands back
    # the new session's hash (session_login.lua): no load after it.
    fields: dict[str, bytes] | None = None
    # The hash as the page cache read it in the page's round trip, for the
    # render it asks for next: the request's first load takes it instead of
    # reading again (what the session was when the request came).
    read_with_page: dict[str, bytes] | None = None
    degraded: RedisUnavailable | None = None  # anonymous because Redis is away
    cookie: Literal["keep", "set", "clear"] = "keep"
    headers_sent: bool = False

    @classmethod
    def from_cookie(
        cls, options: SessionOptions, outages: OutageLog, header: str | None
    ) -> SessionState:
        found = decode(options, header)
        state = cls(
            options, outages, found.token, cookie_came=found.present, resign=found.stale_key
        )
        if found.present and found.token is None:
            state.cookie = "clear"  # garbled or forged: the browser may stop sending it
        return state

    @property
    def accessed(self) -> bool:
        return self.loaded

    def cookie_to_send(self, where: Callable[[], Where]) -> Morsel[str] | None:
        """The cookie the response sets (or deletes), if any; after this the
        cookie can no longer change. ``where`` is read only when a cookie
        goes out (most responses send none)."""
        self.headers_sent = True
        if self.cookie == "set" and self.token is not None:
            return cookie_morsel(self.options, where(), encode(self.options, self.token))
        if self.cookie == "clear":
            return cookie_morsel(self.options, where(), None)
        return None

    def response_headers(self, where: Callable[[], Where]) -> list[tuple[str, str]]:
        """The headers the response gets for this session; marks them sent."""
        headers = []
        cookie = self.cookie_to_send(where)
        if cookie is not None:
            headers.append(("set-cookie", cookie.OutputString()))
            if cookie.value:
                # A response carrying a session token must never sit in a shared cache.
                headers.append(("cache-control", "no-store"))
        if self.accessed:
            headers.append(("vary", "Cookie"))  # the page depends on who asks
        return headers
