"""Timing for Flask apps, by URL rule (``/item/<int:id>``), over a sync tier::

from webtier.web.timing import flask as flask_timing

timed = flask_timing.install(app, tier)  # timed.close() flushes at exit
"""

from __future__ import annotations

from typing import Any

from webtier.sync import WebTier
from webtier.web.timing.core import FLUSH_INTERVAL, ROUTE_KEY, UNMATCHED
from webtier.web.timing.wsgi import WSGIMiddleware


def install(
    app: Any,
    tier: WebTier,
    *,
    unmatched: str = UNMATCHED,
    time_limit: float | None = 1.0,
    batched: bool = True,
    flush_interval: float = FLUSH_INTERVAL,
) -> WSGIMiddleware:
    """Time every request of the Flask ``app`` by its URL rule
    (``/item/<int:id>``): a teardown hook leaves the rule Flask matched where
    :class:`WSGIMiddleware`, wrapped around ``app.wsgi_app``, finds it.
    Returns that middleware: its ``close()`` flushes the batched durations
    (see :mod:`webtier.web.timing.wsgi`)."""
    import flask  # the app's dependency, not webtier's

    def leave_rule(error: BaseException | None) -> None:
        rule = flask.request.url_rule
        if rule is not None:
            flask.request.environ[ROUTE_KEY] = rule.rule

    app.teardown_request(leave_rule)
    timed = WSGIMiddleware(
        app.wsgi_app,
        tier,
        unmatched=unmatched,
        time_limit=time_limit,
        batched=batched,
        flush_interval=flush_interval,
    )
    app.wsgi_app = timed
    return timed
