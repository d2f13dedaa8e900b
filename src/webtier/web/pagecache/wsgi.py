"""Page cache WSGI middleware (any WSGI app; Flask:
:mod:`webtier.web.pagecache.flask`), on a sync tier::

    app = pagecache.WSGIMiddleware(app, tier, rules=PageRules(...))

The same policy as the ASGI middleware (:mod:`webtier.web.pagecache.policy`):
requests the rules leave alone go straight to the app; others are answered
from Redis or rendered once across every process and stored when the
response allows it. Responses that are not stored, and streamed ones (no
``Content-Length``), are passed through as the app yields them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from http import HTTPStatus
from typing import Any, TypeAlias

from webtier import pagecache
from webtier._core.deadline import time_limit
from webtier._core.protocol import Call
from webtier.config import PageCacheSettings
from webtier.counters import Recorder
from webtier.errors import WebtierError
from webtier.pagecache import PageRequest, PageRules, Plan
from webtier.sync import WebTier
from webtier.types import Rendered, Served
from webtier.web.pagecache import policy

Environ: TypeAlias = dict[str, Any]
StartResponse: TypeAlias = Callable[..., Any]
WSGIApp: TypeAlias = Callable[[Environ, StartResponse], Iterable[bytes]]


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


def environ_request(environ: Environ) -> PageRequest:
    pairs = [
        (name[5:].replace("_", "-"), value)
        for name, value in environ.items()
        if name.startswith("HTTP_")
    ]
    # A GET with a body (a "fat GET") carries it: the body is an input too.
    pairs += [
        (n.replace("_", "-"), environ[n])
        for n in ("CONTENT_TYPE", "CONTENT_LENGTH")
        if environ.get(n)
    ]
    headers = policy.lower_headers(pairs)
    host = (
        headers.get("host") or f"{environ.get('SERVER_NAME', '')}:{environ.get('SERVER_PORT', '')}"
    )
    path = (environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")) or "/"
    return PageRequest(
        environ.get("REQUEST_METHOD", "GET"),
        path.encode("latin-1").decode("utf-8", "replace"),
        environ.get("QUERY_STRING", ""),
        environ.get("wsgi.url_scheme", "http"),
        host,
        headers,
    )


class _Closing:
    """A passed-through body that closes the app's iterable when done."""

    def __init__(self, chunks: Iterator[bytes], body: Iterable[bytes]) -> None:
        self._chunks, self._body = chunks, body

    def __iter__(self) -> Iterator[bytes]:
        return self._chunks

    def close(self) -> None:
        close = getattr(self._body, "close", None)
        if close is not None:
            close()


class _Render:
    def __init__(
        self,
        app: WSGIApp,
        environ: Environ,
        start_response: StartResponse,
        plan: Plan,
        settings: PageCacheSettings,
    ) -> None:
        self.app, self.environ, self.start_response = app, environ, start_response
        self.plan, self.settings = plan, settings
        self.result: Rendered | None = None
        self.through: Iterable[bytes] | None = None  # a body passed through

    def __call__(self) -> Rendered:
        started: list[Any] = []
        written: list[bytes] = []

        def capture(line: str, headers: Any, exc_info: Any = None) -> Callable[[bytes], None]:
            started[:] = [line, list(headers)]
            return written.append

        body = self.app(self.environ, capture)
        chunks = iter(body)
        first = next(chunks, None)  # start_response may wait for the first chunk
        line, headers = started
        status = int(line.split(" ", 1)[0])
        pairs = tuple((str(k), str(v)) for k, v in headers)
        ttl = policy.store_ttl(self.settings, self.plan, status, pairs)
        if ttl is None:
            write = self.start_response(line, [*headers, ("X-Cache", "MISS")])
            for chunk in written:
                write(chunk)
            rest = itertools.chain(() if first is None else (first,), chunks)
            self.through = _Closing(rest, body)
            self.result = Rendered(status, pairs, b"", None, sent=True)
            return self.result
        try:
            data = b"".join(itertools.chain(written, () if first is None else (first,), chunks))
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
        self.result = Rendered(status, pairs, data, ttl)
        return self.result


class WSGIMiddleware:
    """WSGI middleware answering cacheable requests from the page cache."""

    def __init__(self, app: WSGIApp, tier: WebTier, rules: PageRules) -> None:
        self.app, self.tier = app, tier
        self.policy = policy.Policy(tier.config, rules)
        self.recorder: Recorder | None = (
            tier.counters.recorder() if self.policy.settings.counters else None
        )

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        request = environ_request(environ)
        plan = self.policy.plan(request)
        if plan is None:
            return self.app(environ, start_response)
        render = _Render(self.app, environ, start_response, plan, self.policy.settings)
        try:
            with time_limit(self.policy.settings.time_limit):
                served = self.tier.transport.run(
                    pagecache.ops.serve(self.tier.config, plan, Call(render))
                )
        except WebtierError as error:
            self.policy.outage.failed(error)
            served = Served("MISS", rendered=render.result or render())
        if self.recorder is not None:
            for name in self.policy.counters(served.outcome, render.result is not None):
                self.recorder.incr(name)
        if served.page is not None:
            status, headers, body = policy.page_response(
                served.page, request.headers, served.outcome
            )
        else:
            assert served.rendered is not None
            if render.through is not None:
                return render.through
            status, headers, body = policy.rendered_response(served.rendered)
        start_response(_status_line(status), headers)
        return [body]

    def close(self) -> None:
        """Flush the hit/miss counts (at shutdown; also done at exit)."""
        if self.recorder is not None:
            self.recorder.close()
