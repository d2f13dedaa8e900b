# Generated from src/webtier/deployment/aio.py by scripts/unasync.py: do not edit.
"""The deployment settings' sync API: the ``tier.deployment`` part.
It is generated from :mod:`webtier.deployment.aio` (scripts/unasync.py)."""

from __future__ import annotations

from webtier._core.facade import Part, sync_op
from webtier.deployment import ops


class Deployment(Part):
    """The settings that decide where the deployment's data lives, stored in
    Redis by its first writer: see docs/deployment-settings.md. ``check()``
    once at startup stores them (first writer) or refuses a mismatch."""

    check = sync_op(ops.check)
    stored = sync_op(ops.stored)
    adopt = sync_op(ops.adopt)
    reset = sync_op(ops.reset)
