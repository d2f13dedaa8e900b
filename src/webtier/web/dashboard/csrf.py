"""The CSRF check of the dashboard's actions: starlette-csrf's double
submit (the page sends its cookie's value in an ``x-csrftoken`` header,
which another site cannot read), under a cookie name of the dashboard's own,
and replacing a cookie it did not sign rather than refusing every action."""

from __future__ import annotations

from itsdangerous import BadSignature
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette_csrf.middleware import CSRFMiddleware

# Not ``csrftoken``: the shop's, Django's and other apps' on the same host
# (cookies ignore ports) would be taken for the dashboard's.
CSRF_COOKIE = "webtier_dashboard_csrf"


class DashboardCsrf(CSRFMiddleware):
    """starlette-csrf's check; a cookie of the dashboard's name that this
    app did not sign (a restarted dashboard's: its secret is per process)
    is dropped from the request, so the response sets a fresh one, and the
    page's next poll heals the next action."""

    def __init__(self, app: ASGIApp, secret: str) -> None:
        super().__init__(app, secret, cookie_name=CSRF_COOKIE, cookie_samesite="strict")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope = {**scope, "headers": [self._kept(k, v) for k, v in scope["headers"]]}
        await super().__call__(scope, receive, send)

    def _kept(self, name: bytes, value: bytes) -> tuple[bytes, bytes]:
        if name.lower() != b"cookie":
            return name, value
        pairs = value.decode("latin-1").split(";")
        return name, ";".join(p for p in pairs if not self._stale(p)).encode("latin-1")

    def _stale(self, pair: str) -> bool:
        key, sep, token = pair.partition("=")
        if not sep or key.strip() != CSRF_COOKIE:
            return False
        try:
            self.serializer.loads(token.strip())
        except (BadSignature, UnicodeError):
            return True
        return False
