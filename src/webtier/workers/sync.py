# Generated from src/webtier/workers/aio.py by scripts/unasync.py: do not edit.
"""The workers' sync API: the ``tier.workers`` part.
It is generated from :mod:`webtier.workers.aio` (scripts/unasync.py)."""

from __future__ import annotations

from webtier._core.facade import Part, sync_op
from webtier.workers import liveness


class Workers(Part):
    """Maintenance workers that announce themselves (see :mod:`webtier.workers`)."""

    alive = sync_op(liveness.alive)
