"""Deprecated: ``webtier rows`` is :mod:`webtier.cli.rows`."""

from webtier._core.compat import moved

__getattr__ = moved(__name__, {"rows": "webtier.cli.rows:rows"})
