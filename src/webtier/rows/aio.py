"""The row cache's asyncio API: the ``tier.rows`` part.
:mod:`webtier.rows.sync` is generated from this module (scripts/unasync.py)."""

from __future__ import annotations

from webtier._core.facade import Part, async_op
from webtier.rows import ops, refresh


class Rows(Part):
    """Database rows kept fresh in Redis (Redis in Action 2.4): see docs/rows.md."""

    schedule = async_op(ops.schedule)
    unschedule = async_op(ops.unschedule)
    get = async_op(ops.get)
    get_many = async_op(ops.get_many)
    warm = async_op(ops.warm)
    invalidate = async_op(ops.invalidate)
    refresh_now = async_op(ops.refresh_now)
    refresh_due = async_op(refresh.refresh_due)
    status = async_op(ops.status)
