"""The page cache (Redis in Action 2.3): whole responses kept in Redis,
one package:

- ``rules``: which requests may be answered from the cache, and under which
  key (:class:`PageRules`, :class:`CacheRoute`); ``request``: what the cache
  reads of a request and the key of its page; ``admission``: which item
  pages may be cached (:class:`RankAdmission`, :class:`SetAdmission`);
- ``ops``: serving a request (lookup, single-flight render, store):
  I/O-free generators; ``invalidation``: dropping pages; ``copies``: the
  stored copy of a page;
- ``pagecache_*.lua``: their scripts;
- ``aio``: the ``tier.pagecache`` part; ``sync``: its sync twin, generated
  from ``aio``.

The middlewares that serve pages are :mod:`webtier.web.pagecache`; see
docs/pagecache.md.
"""

from webtier.pagecache.admission import RankAdmission, SetAdmission
from webtier.pagecache.request import PageRequest
from webtier.pagecache.rules import BOOK_RULES, CacheRoute, PageRules, Plan

__all__ = [
    "BOOK_RULES",
    "CacheRoute",
    "PageRequest",
    "PageRules",
    "Plan",
    "RankAdmission",
    "SetAdmission",
]
