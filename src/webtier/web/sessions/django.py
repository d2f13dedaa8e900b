"""Sessions for Django, over a sync tier: Django's own sessions kept in
webtier (``SESSION_ENGINE``), or webtier's session middleware.

Django's ``request.session`` (and ``auth.login``/``logout``, ``messages``,
the admin) on webtier, ``settings.py``::

    SESSION_ENGINE = "webtier.web.sessions.django"
    WEBTIER_SESSIONS = {"tier": "myshop.redis.tier"}   # a WebTier, or the dotted path to one

:class:`SessionStore` keeps each session in ``tier.session_store``
(:mod:`webtier.sessions.store`): JSON by key, a save sends only the keys
the request changed, an update never resurrects a session ended meanwhile,
Redis enforces each session's expiry; ``clearsessions`` runs a pass of the
capped store's cleaner. While Redis is unreachable, Django would answer its
500 page; in the root URLconf, ``handler500 =
"webtier.web.sessions.django.server_error"`` answers 503 instead (any other
error gets Django's own 500 page). Its async methods run the sync ones in a thread, as
Django's database backends do.

webtier's session middleware (its cookie, carts and viewed items)::

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

import sys
from collections.abc import Callable
from typing import Any

from webtier._core.deadline import time_limit
from webtier.errors import ConfigError, RedisUnavailable
from webtier.sync import WebTier
from webtier.web._lazy import lazy
from webtier.web.sessions.adapter import Adapter, environ_headers
from webtier.web.sessions.cookie import Where, came_through_proxy
from webtier.web.sessions.options import SessionOptions
from webtier.web.sessions.outage import UNAVAILABLE_BODY, outage_log, unavailable_headers
from webtier.web.sessions.sync import Session


def configured_tier() -> WebTier:
    """The tier of ``settings.WEBTIER_SESSIONS["tier"]`` (a WebTier, or the
    dotted path to one)."""
    from django.conf import settings
    from django.utils.module_loading import import_string

    tier = getattr(settings, "WEBTIER_SESSIONS", {}).get("tier")
    if tier is None:
        raise ConfigError("WEBTIER_SESSIONS['tier']: the WebTier sessions live in")
    found = import_string(tier) if isinstance(tier, str) else tier
    if not isinstance(found, WebTier):
        raise ConfigError(f"WEBTIER_SESSIONS['tier'] is not a webtier.WebTier: {found!r}")
    return found


class Middleware(Adapter[WebTier]):
    """Gives each request a lazy ``request.webtier_session``."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        from django.conf import settings

        configured = dict(getattr(settings, "WEBTIER_SESSIONS", {}))
        configured.pop("tier", None)
        super().__init__(configured_tier(), None, configured)
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        from django.utils.cache import patch_vary_headers

        meta = request.META
        state = self.state(meta.get("HTTP_COOKIE"))
        request.webtier_session = Session(self.tier, state)
        with time_limit(self.options.time_limit):
            response = self.get_response(request)

        def where() -> Where:
            return Where(
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


def server_error(request: Any) -> Any:
    """Django's ``handler500`` that answers 503 when the error is Redis being
    unreachable (a session read in a view, or the session middleware's save),
    else Django's own 500 page. Django calls it while handling the error."""
    from django.http import HttpResponse
    from django.views.defaults import server_error as djangos_server_error

    error = sys.exc_info()[1]
    if not isinstance(error, RedisUnavailable):
        return djangos_server_error(request)
    _OUTAGES.failed(error, "answered 503")
    headers = dict(unavailable_headers(SessionOptions()))
    return HttpResponse(UNAVAILABLE_BODY, status=503, headers=headers)


_OUTAGES = outage_log(SessionOptions().log_every)


# The engine's base class is Django's: imported when Django asks for it
# (SESSION_ENGINE), so the middleware alone imports no Django at import.
__getattr__ = lazy(__name__, {"SessionStore": "webtier.web.sessions.django_store"})
