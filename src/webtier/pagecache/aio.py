"""The page cache's asyncio API: the ``tier.pagecache`` part.
:mod:`webtier.pagecache.sync` is generated from this module (scripts/unasync.py)."""

from __future__ import annotations

from webtier._core.facade import Part, async_op
from webtier.pagecache import invalidation, ops


class PageCache(Part):
    """Whole pages kept in Redis (Redis in Action 2.3): see docs/pagecache.md.
    Pages are served by the middleware (:mod:`webtier.web.pagecache`);
    these drop them."""

    serve = async_op(ops.serve)
    invalidate = async_op(invalidation.invalidate)
    invalidate_item = async_op(invalidation.invalidate_item)
    invalidate_all = async_op(invalidation.invalidate_all)
