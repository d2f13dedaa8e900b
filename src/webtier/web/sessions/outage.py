"""Redis away while a request needs its session: the log line (throttled)
and the 503 every adapter answers."""

from __future__ import annotations

import logging

from webtier._core.throttle import Throttle
from webtier.errors import WebtierError
from webtier.web.sessions.options import SessionOptions

log = logging.getLogger("webtier.sessions")

UNAVAILABLE_BODY = b"Service unavailable: the session store cannot be reached. Retry shortly.\n"


class OutageLog:
    """Logs Redis being unreachable: the first failure at once, then at most
    one line per ``every`` seconds with the count meanwhile, never a line
    per request."""

    def __init__(self, every: float) -> None:
        self._throttle = Throttle(every)

    def failed(self, error: WebtierError, outcome: str) -> None:
        if missed := self._throttle.due():
            log.warning(
                "session store unreachable (%d requests since the last report, %s): %s",
                missed,
                outcome,
                error,
            )


def unavailable_headers(options: SessionOptions) -> list[tuple[str, str]]:
    """Headers of the 503 answered when the session is needed but Redis is away."""
    return [
        ("content-type", "text/plain; charset=utf-8"),
        ("content-length", str(len(UNAVAILABLE_BODY))),
        ("retry-after", str(options.retry_after)),
        ("cache-control", "no-store"),
    ]
