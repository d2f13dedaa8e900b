"""Timing middleware: each request's duration as its route's ``AccessTime``.

The context is the matched route's *template* (``/item/{id}`` in Starlette,
``/item/<int:id>`` in Flask), never the raw path: one context per route, so
the number of contexts (and keys, and ranking entries) stays bounded however
many item ids, query strings or scanners' paths arrive. Requests no route
matched (404s) fold into one context, ``<unmatched>``.

A request counts as an error when the app raises or answers 5xx. The time
runs from the request's arrival to its last body chunk being handed to the
server (ASGI), or to the server closing the response (WSGI): streamed
responses are timed whole. Recording happens after the response is sent, and
a failure to record is logged, never raised into the app.

Durations are batched by default: each request adds its own to an
in-process statistics recorder (:class:`webtier.stats.StatsRecorder`), flushed every
``flush_interval`` (0.1) seconds with one script call per route, and on
shutdown (ASGI: the lifespan's, or ``await middleware.aclose()``; WSGI: at
exit, or ``middleware.close()``). ``batched=False``: one round trip per
request.

Starlette (and FastAPI) apps::

    app.add_middleware(timing.ASGIMiddleware, tier=async_tier)

Flask apps: ``webtier.web.timing.flask.install(app, tier)``.

Other WSGI apps: ``timing.WSGIMiddleware(app, tier)``, with a framework hook
that sets ``environ["webtier.route"]`` to the template, or ``route=``, a
function of the environ (after the app ran) returning it. Other ASGI
frameworks pass ``route=``, a function of the scope after the app ran.

One shared core (``core``: recording as an operation) and thin adapters:
``asgi``, ``wsgi``, ``flask``.
"""

from typing import TYPE_CHECKING

from webtier.web._lazy import lazy

# Flask is imported only when install() runs.
from webtier.web.timing import flask
from webtier.web.timing.core import ROUTE_KEY, UNMATCHED, TimingOptions
from webtier.web.timing.wsgi import WSGIMiddleware, environ_route

if TYPE_CHECKING:
    from webtier.web.timing.asgi import ASGIMiddleware
    from webtier.web.timing.part import starlette_route

__all__ = [
    "ROUTE_KEY",
    "UNMATCHED",
    "ASGIMiddleware",
    "TimingOptions",
    "WSGIMiddleware",
    "environ_route",
    "flask",
    "starlette_route",
]

# The ASGI adapter needs Starlette (webtier[web]): imported on first use.
__getattr__ = lazy(
    __name__,
    {"ASGIMiddleware": "webtier.web.timing.asgi", "starlette_route": "webtier.web.timing.part"},
)
