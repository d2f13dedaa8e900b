"""The workers' asyncio API: the ``tier.workers`` part.
:mod:`webtier.workers.sync` is generated from this module (scripts/unasync.py)."""

from __future__ import annotations

from webtier._core.facade import Part, async_op
from webtier.workers import liveness


class Workers(Part):
    """Maintenance workers that announce themselves (see :mod:`webtier.workers`)."""

    alive = async_op(liveness.alive)
