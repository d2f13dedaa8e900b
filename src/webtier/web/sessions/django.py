"""Session middleware for Django: the WSGI middleware's logic as a Django
middleware, over a sync tier.

``settings.py``::

    MIDDLEWARE = [..., "webtier.web.sessions.django.Middleware", ...]
    WEBTIER_SESSIONS = {
        "tier": "myshop.redis.tier",   # a WebTier, or the dotted path to one
        "signing_keys": [env("SESSION_KEY")],
    }

Views get ``request.webtier_session`` (a :class:`~webtier.web.sessions.Session`).
The other keys of ``WEBTIER_SESSIONS`` are the fields of
:class:`~webtier.web.sessions.SessionOptions`. A view that needs the session
while Redis is unreachable gets a 503 (``process_exception``), never
Django's 500 page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webtier._core.deadline import time_limit
from webtier.errors import ConfigError, RedisUnavailable
from webtier.sync import WebTier
from webtier.web.sessions.adapter import Adapter, environ_headers
from webtier.web.sessions.cookie import Where, came_through_proxy
from webtier.web.sessions.outage import UNAVAILABLE_BODY
from webtier.web.sessions.sync import Session


class Middleware(Adapter[WebTier]):
    """Gives each request a lazy ``request.webtier_session``."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        from django.conf import settings
        from django.utils.module_loading import import_string

        configured = dict(getattr(settings, "WEBTIER_SESSIONS", {}))
        tier = configured.pop("tier", None)
        if tier is None:
            raise ConfigError("WEBTIER_SESSIONS['tier']: the WebTier sessions live in")
        super().__init__(import_string(tier) if isinstance(tier, str) else tier, None, configured)
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        from django.utils.cache import patch_vary_headers

        meta = request.META
        state = self.state(meta.get("HTTP_COOKIE"))
        request.webtier_session = Session(self.tier, state)
        with time_limit(self.options.time_limit):
            response = self.get_response(request)
        where = Where(
            meta.get("SCRIPT_NAME", ""),
            request.scheme,
            meta.get("HTTP_HOST", ""),
            peer=meta.get("REMOTE_ADDR", ""),
            proxied=came_through_proxy(environ_headers(meta)),
        )
        cookie = state.cookie_to_send(where)
        if cookie is not None:
            response.cookies[cookie.key] = cookie
            if cookie.value:  # a session token never sits in a shared cache
                response.headers["Cache-Control"] = "no-store"
        if state.accessed:
            patch_vary_headers(response, ("Cookie",))
        return response

    def process_exception(self, request: Any, exception: Exception) -> Any:
        if not isinstance(exception, RedisUnavailable):
            return None
        from django.http import HttpResponse

        headers = dict(self.unavailable(exception))
        return HttpResponse(UNAVAILABLE_BODY, status=503, headers=headers)
