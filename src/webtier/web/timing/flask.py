"""Timing for Flask apps, by URL rule (``/item/<int:id>``), over a sync tier::

from webtier.web.timing import flask as flask_timing

flask_timing.install(app, tier)
"""

from __future__ import annotations

from typing import Any

from webtier.sync import WebTier
from webtier.web.timing.core import ROUTE_KEY, UNMATCHED
from webtier.web.timing.wsgi import WSGIMiddleware


def install(
    app: Any, tier: WebTier, *, unmatched: str = UNMATCHED, time_limit: float | None = 1.0
) -> None:
    """Time every request of the Flask ``app`` by its URL rule
    (``/item/<int:id>``): a teardown hook leaves the rule Flask matched where
    :class:`WSGIMiddleware`, wrapped around ``app.wsgi_app``, finds it."""
    import flask  # the app's dependency, not webtier's

    def leave_rule(error: BaseException | None) -> None:
        rule = flask.request.url_rule
        if rule is not None:
            flask.request.environ[ROUTE_KEY] = rule.rule

    app.teardown_request(leave_rule)
    app.wsgi_app = WSGIMiddleware(app.wsgi_app, tier, unmatched=unmatched, time_limit=time_limit)
