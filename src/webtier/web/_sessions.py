"""Deprecated path: the session middlewares' shared core is split by idea
in :mod:`webtier.web.sessions` (options, cookie, outage, state, flows)."""

from webtier._core.compat import moved

_HOME = {
    "SessionOptions": "options",
    "SESSION_KEY": "options",
    "DEFAULT_COOKIE": "options",
    "encode": "cookie",
    "decode": "cookie",
    "Decoded": "cookie",
    "Where": "cookie",
    "cookie_morsel": "cookie",
    "is_loopback": "cookie",
    "OutageLog": "outage",
    "UNAVAILABLE_BODY": "outage",
    "unavailable_headers": "outage",
    "SessionState": "state",
    "header_values": "adapter",
    "merge_headers": "adapter",
}

__getattr__ = moved(
    __name__, {name: f"webtier.web.sessions.{home}:{name}" for name, home in _HOME.items()}
)
