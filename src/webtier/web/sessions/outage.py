"""Redis away while a request needs its session: the 503 every adapter
answers (the log line is :class:`webtier._core.throttle.OutageLog`'s)."""

from __future__ import annotations

from webtier._core.throttle import OutageLog
from webtier.web.sessions.options import SessionOptions

UNAVAILABLE_BODY = b"Service unavailable: the session store cannot be reached. Retry shortly.\n"


def outage_log(every: float) -> OutageLog:
    """The log of a middleware's failures to reach the session store."""
    return OutageLog("webtier.sessions", every, "session store unreachable")


def unavailable_headers(options: SessionOptions) -> list[tuple[str, str]]:
    """Headers of the 503 answered when the session is needed but Redis is away."""
    return [
        ("content-type", "text/plain; charset=utf-8"),
        ("content-length", str(len(UNAVAILABLE_BODY))),
        ("retry-after", str(options.retry_after)),
        ("cache-control", "no-store"),
    ]
