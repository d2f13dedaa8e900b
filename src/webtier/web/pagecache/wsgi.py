"""Page cache WSGI middleware (any WSGI app; Flask:
:mod:`webtier.web.pagecache.flask`), on a sync tier::

    app = pagecache.WSGIMiddleware(app, tier, rules=PageRules(...))

The same policy as the ASGI middleware (:mod:`webtier.web.pagecache.policy`):
requests the rules leave alone go straight to the app; others are answered
from Redis or rendered once across every process and stored when the
response allows it. Responses that are not stored, and streamed ones (no
``Content-Length``), are passed through as the app yields them.

Holes (:mod:`webtier.pagecache.holes`): with ``holes=``, the pages of routes
with ``holes=True`` are answered from the cache to visitors with a session
too, their holes filled from the session read in the page's round trip.
The session is webtier's session middleware's when it wraps this one::

    app = sessions.WSGIMiddleware(pagecache.WSGIMiddleware(app, tier, rules, holes=holes), tier)

or, for sessions kept inside the app, read from their cookie, named by
``sessions=SessionOptions(...)``: webtier's Django middleware
(``webtier.web.sessions.django.Middleware``: its options), Django's own
sessions on webtier (``SESSION_ENGINE = "webtier.web.sessions.django"``:
``SessionOptions(cookie_name=settings.SESSION_COOKIE_NAME)``), or
``flask.session`` on webtier (:class:`webtier.web.sessions.flask.SessionInterface`:
``SessionOptions(cookie_name=app.config["SESSION_COOKIE_NAME"])``). The
cookie must be among ``PageCacheSettings.private_cookies`` (Django's and
Flask's default names are). A render that read the session carries
``Vary: Cookie`` (the session middleware, engine or interface says so) and
is never stored.

With ``item_views=True`` an answer of an item page counts its view (in the
session's recently viewed too, for a visitor with a session on a route with
holes), a cached one too.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from http import HTTPStatus
from typing import Any, TypeAlias

from webtier import pagecache, sessions
from webtier._core.deadline import time_limit
from webtier._core.protocol import Call, Op
from webtier.config import PageCacheSettings
from webtier.counters import Recorder
from webtier.errors import ConfigError, WebtierError
from webtier.pagecache import PageRequest, PageRules, Plan
from webtier.pagecache.holes import ANONYMOUS, Holes
from webtier.pagecache.request import is_private
from webtier.sync import WebTier
from webtier.types import Rendered, Served
from webtier.web.pagecache import policy
from webtier.web.sessions.adapter import Adapter
from webtier.web.sessions.options import SESSION_KEY, SessionOptions
from webtier.web.sessions.state import SessionState

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
        plan: Plan | None,
        settings: PageCacheSettings,
        holes: Holes | None = None,
        visitor: SessionState | None = None,
    ) -> None:
        self.app, self.environ, self.start_response = app, environ, start_response
        self.plan, self.settings = plan, settings
        # A page with holes is kept whole, to be filled before it goes out;
        # one whose render read the session is never stored.
        self.holes, self.visitor = holes, visitor
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
        ttl = None
        if self.plan is not None:
            ttl = policy.store_ttl(self.settings, self.plan, status, pairs)
        if ttl is None and self.holes is None:
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
        places: tuple[tuple[int, str], ...] = ()
        personal = False
        if self.holes is not None:
            data, places = self.holes.split(data)
            visitor = self.visitor
            if visitor is not None and visitor.loaded:
                ttl = None  # the app read the session: its page may be one visitor's
            # Not stored, for a visitor with a session: it may be theirs alone,
            # and says nothing of the page (no pass note; see the ASGI part).
            personal = ttl is None and visitor is not None and visitor.token is not None
        self.result = Rendered(status, pairs, data, ttl, holes=places, personal=personal)
        return self.result


class WSGIMiddleware:
    """WSGI middleware answering cacheable requests from the page cache
    (see the module: ``holes`` and ``item_views``)."""

    def __init__(
        self,
        app: WSGIApp,
        tier: WebTier,
        rules: PageRules,
        *,
        holes: Holes | None = None,
        sessions: SessionOptions | None = None,
        item_views: bool = False,
    ) -> None:
        self.app, self.tier = app, tier
        self.policy = policy.Policy(tier.config, rules, fills_holes=holes is not None)
        self.holes, self.item_views = holes, item_views
        # Reads the session cookie itself, for sessions kept inside the app
        # (None: webtier's session middleware around this one).
        self.cookies = None if sessions is None else Adapter(tier, sessions, {})
        if (
            sessions is not None
            and sessions.cookie_name not in self.policy.settings.private_cookies
        ):
            # Else a request carrying it would not count as a visitor's:
            # its pages never stored, its view counted twice.
            raise ConfigError(
                f"sessions: the cookie {sessions.cookie_name!r} is not among "
                "PageCacheSettings.private_cookies; add it there"
            )
        self.recorder: Recorder | None = (
            tier.counters.recorder() if self.policy.settings.counters else None
        )

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        request = environ_request(environ)
        plan = self.policy.plan(request)
        holes = None
        if self.holes is not None and (
            plan.holes if plan is not None else self.policy.holes_at(request)
        ):
            holes = self.holes
        if plan is None and holes is None:
            return self.app(environ, start_response)
        visitor = self._visitor(environ) if holes is not None else None
        # An item page's view: the session's touch counts a visitor's with a
        # session (on a route with holes: in the page's round trip), the
        # ranking alone an anonymous one's, once answered.
        item = self._item(plan, request)
        private = is_private(self.policy.settings, request.headers)
        read = None if visitor is None else self._read(visitor, item)
        render = _Render(
            self.app, environ, start_response, plan, self.policy.settings, holes, visitor
        )
        visit = ANONYMOUS
        try:
            with time_limit(self.policy.settings.time_limit):
                if plan is None:
                    fields = None if read is None else self.tier.transport.run(read)
                    served = None
                elif read is None:
                    fields = None
                    served = self.tier.transport.run(
                        pagecache.ops.serve(self.tier.config, plan, Call(render))
                    )
                else:
                    served, fields = self.tier.transport.run(
                        pagecache.ops.serve_beside(
                            self.tier.config, plan, Call(render), read, self._rendered_for(plan)
                        )
                    )
            visit = policy.visit_of(self.tier.config, fields)
        except WebtierError as error:
            self.policy.outage.failed(error)
            served = None if plan is None else Served("MISS", rendered=render.result or render())
        if served is None:  # a route with holes the cache may not answer: filled all the same
            rendered = render.result or render()
            if render.through is not None:
                return render.through
            status, headers, body = policy.filled_render(
                rendered, list(rendered.headers), holes, visit
            )
            return self._answer(start_response, status, headers, body, item, private)
        if self.recorder is not None:
            for name in self.policy.counters(served.outcome, render.result is not None):
                self.recorder.incr(name)
        if served.page is not None:
            status, headers, body = policy.page_response(
                served.page, request.headers, served.outcome, visit=visit, fill=holes
            )
        else:
            assert served.rendered is not None
            if render.through is not None:
                self._count_view(item, private, served.rendered.status)
                return render.through
            status, headers, body = policy.filled_render(
                served.rendered, policy.rendered_response(served.rendered)[1], holes, visit
            )
        return self._answer(start_response, status, headers, body, item, private)

    def _rendered_for(self, plan: Plan) -> Callable[[Any], bool] | None:
        """Whether a session's hash calls for a render (the route's ``render_for``)."""
        if plan.render_for is None:
            return None
        cfg = self.tier.config
        return lambda fields: plan.renders(policy.visit_of(cfg, fields))

    def _visitor(self, environ: Environ) -> SessionState:
        if self.cookies is not None:
            return self.cookies.state(environ.get("HTTP_COOKIE"))
        session = environ.get(SESSION_KEY)
        if session is None:
            raise ConfigError(
                "the page cache's holes need webtier's session middleware around it: "
                "sessions.WSGIMiddleware(pagecache.WSGIMiddleware(app, ..., holes=...), ...), "
                "or, for sessions kept inside the app (webtier's Django middleware, Django's "
                "SESSION_ENGINE, Flask's SessionInterface), their cookie: "
                "sessions=SessionOptions(cookie_name=...)"
            )
        state: SessionState = session.state
        return state

    def _item(self, plan: Plan | None, request: PageRequest) -> str | None:
        """The item whose view an answer counts: a read of an item page."""
        if not self.item_views or request.method not in ("GET", "HEAD"):
            return None
        if plan is not None and plan.admission is not None:
            return plan.item
        return self.policy.item_of(request)

    def _read(self, visitor: SessionState, item: str | None) -> Op[Any] | None:
        if visitor.token is None:
            return None
        return sessions.ops.visit(
            self.tier.config, visitor.token, visitor.refresh_after, item, visitor.views
        )

    def _answer(
        self,
        start_response: StartResponse,
        status: int,
        headers: list[tuple[str, str]],
        body: bytes,
        item: str | None,
        private: bool,
    ) -> list[bytes]:
        start_response(_status_line(status), headers)
        self._count_view(item, private, status)
        return [body]

    def _count_view(self, item: str | None, private: bool, status: int) -> None:
        """An anonymous visitor's view of an item page, once answered (a
        visitor with a session has theirs counted by their session)."""
        if item is None or private or status not in (200, 304):
            return
        try:
            self.tier.ranking.record_view(item)
        except WebtierError as error:  # a lost view must not fail a served page
            self.policy.outage.failed(error)

    def close(self) -> None:
        """Flush the hit/miss counts (at shutdown; also done at exit)."""
        if self.recorder is not None:
            self.recorder.close()
