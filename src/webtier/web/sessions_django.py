"""Deprecated path: Django's session middleware is
``webtier.web.sessions.django.Middleware``."""

from webtier._core.compat import moved

__getattr__ = moved(__name__, {"SessionMiddleware": "webtier.web.sessions.django:Middleware"})
