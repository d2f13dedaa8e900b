"""The deployment settings' asyncio API: the ``tier.deployment`` part.
:mod:`webtier.deployment.sync` is generated from this module (scripts/unasync.py)."""

from __future__ import annotations

from webtier._core.facade import Part, async_op
from webtier.deployment import ops


class Deployment(Part):
    """The settings that decide where the deployment's data lives, stored in
    Redis by its first writer: see docs/deployment-settings.md. ``check()``
    once at startup stores them (first writer) or refuses a mismatch."""

    check = async_op(ops.check)
    stored = async_op(ops.stored)
    adopt = async_op(ops.adopt)
    reset = async_op(ops.reset)
