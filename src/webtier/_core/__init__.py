"""The engine every capability shares: the request protocol, the failure
table (``wire``), the executors (``drive``), the redis-py shim (``redispy``),
the facade parts, Lua scripts, key layout, input checks and time budgets.

Nothing here is public API; the public names are re-exported from ``webtier``.
"""
