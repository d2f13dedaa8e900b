# Generated from src/webtier/rows/aio.py by scripts/unasync.py: do not edit.
"""The row cache's sync API: the ``tier.rows`` part.
It is generated from :mod:`webtier.rows.aio` (scripts/unasync.py)."""

from __future__ import annotations

from webtier._core.facade import Part, sync_op
from webtier.rows import ops, refresh


class Rows(Part):
    """Database rows kept fresh in Redis (Redis in Action 2.4): see docs/rows.md."""

    schedule = sync_op(ops.schedule)
    unschedule = sync_op(ops.unschedule)
    get = sync_op(ops.get)
    get_many = sync_op(ops.get_many)
    warm = sync_op(ops.warm)
    invalidate = sync_op(ops.invalidate)
    refresh_now = sync_op(ops.refresh_now)
    refresh_due = sync_op(refresh.refresh_due)
    status = sync_op(ops.status)
