# Generated from src/webtier/pagecache/aio.py by scripts/unasync.py: do not edit.
"""The page cache's sync API: the ``tier.pagecache`` part.
It is generated from :mod:`webtier.pagecache.aio` (scripts/unasync.py)."""

from __future__ import annotations

from webtier._core.facade import Part, sync_op
from webtier.pagecache import invalidation, ops


class PageCache(Part):
    """Whole pages kept in Redis (Redis in Action 2.3): see docs/pagecache.md.
    Pages are served by the middleware (:mod:`webtier.web.pagecache`);
    these drop them."""

    serve = sync_op(ops.serve)
    invalidate = sync_op(invalidation.invalidate)
    invalidate_item = sync_op(invalidation.invalidate_item)
    invalidate_all = sync_op(invalidation.invalidate_all)
