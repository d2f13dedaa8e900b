"""Deprecated path: the page cache's HTTP policy is
:mod:`webtier.web.pagecache.policy`."""

from webtier._core.compat import moved

_NAMES = (
    "COUNTERS",
    "OutageLog",
    "Policy",
    "UnkeyedLog",
    "accepts_gzip",
    "lower_headers",
    "page_response",
    "rendered_response",
    "store_ttl",
)

__getattr__ = moved(__name__, {name: f"webtier.web.pagecache.policy:{name}" for name in _NAMES})
