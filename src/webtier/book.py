"""The book's functions, under the book's names and arguments.

For readers of *Redis in Action*: ``conn`` first, as in the listings, and any
redis-py client will do (``Redis`` or ``RedisCluster``, with or without
``decode_responses``); results come back as ``str``/``int``/``float``, never
bytes. Each function is a thin wrapper over webtier's real API, with its
default settings and key prefix: where the book's listing has a bug, these
do what the book meant.

Daemons (``clean_counters``...) run until ``stop`` is set or the process is
interrupted; ``once=True`` runs a single pass and returns.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from webtier._core.protocol import Call
from webtier.config import Config, RankingSettings, SessionSettings
from webtier.errors import ConfigError, RedisUnavailable
from webtier.pagecache import BOOK_RULES, PageRequest
from webtier.rows import FunctionSource, Row, Source
from webtier.stats import AccessTimer
from webtier.sync import WebTier
from webtier.types import RefreshReport, Rendered
from webtier.workers import JOBS, Worker

T = TypeVar("T")

# The book's layout: the item view ranking in one zset ({v}:viewed), on a
# single server and on Cluster alike.
_BOOK_CONFIG = Config(ranking=RankingSettings(shards=1))
# The session functions' tier: strict mode off (see _sessions_tier).
_SESSIONS_CONFIG = dataclasses.replace(_BOOK_CONFIG, sessions=SessionSettings(strict=False))

_tiers: weakref.WeakKeyDictionary[Any, WebTier] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def tier_for(conn: Any) -> WebTier:
    """The WebTier the book's functions use for ``conn`` (one per client)."""
    with _lock:
        try:
            tier = _tiers.get(conn)
        except TypeError:  # not weakly referable: no redis-py client (WebTier says so)
            return WebTier(conn, _BOOK_CONFIG)
        if tier is None:
            tier = _tiers[conn] = WebTier(conn, _BOOK_CONFIG)
        return tier


def _daemon(conn: Any, job: str, once: bool, stop: threading.Event | None) -> None:
    Worker(tier_for(conn), [JOBS[job]], once=once, stop=stop).run()


# -- 5.2.1 counters --------------------------------------------------------------------


def update_counter(conn: Any, name: str, count: int = 1, now: float | None = None) -> None:
    """Add ``count`` to counter ``name`` at every precision (Listing 5.3)."""
    tier_for(conn).counters.record(name, count, now)


def get_counter(conn: Any, name: str, precision: int) -> list[tuple[int, int]]:
    """``(slice start, count)`` pairs of one precision, oldest first (Listing 5.4)."""
    return tier_for(conn).counters.get(name, precision)


def clean_counters(conn: Any, once: bool = False, *, stop: threading.Event | None = None) -> None:
    """The cleanup daemon (Listing 5.5): a pass a minute, each precision on
    the book's schedule. ``once=True`` runs one pass and returns."""
    _daemon(conn, "counters", once, stop)


# -- 2.4 row cache ----------------------------------------------------------------------

# The book keeps its rows under `inv:<row id>`; here they are source "inv".
BOOK_ROWS = "inv"


class _BookRows(Source):
    """The book's rows: scheduling and reading need only the name; loading
    goes to the function or source handed to :func:`cache_rows`."""

    def __init__(self, loader: Source | None = None) -> None:
        super().__init__(BOOK_ROWS)
        self._loader = loader

    def load(self, keys: Sequence[str]) -> dict[str, Row]:
        if self._loader is None:
            raise ConfigError("the book's rows are loaded by cache_rows(conn, load=...)")
        return self._loader.load(keys)


_ROWS = _BookRows()


def schedule_row_cache(conn: Any, row_id: object, delay: float) -> None:
    """Refresh row ``row_id`` every ``delay`` seconds, starting now; ``delay
    <= 0`` stops refreshing it and drops its cached copy (Listing 2.7)."""
    tier_for(conn).rows.schedule(_ROWS, row_id, delay)


def cache_rows(
    conn: Any,
    *,
    load: Callable[[str], Mapping[str, Any] | None] | Source,
    once: bool = False,
    stop: threading.Event | None = None,
) -> RefreshReport | None:
    """The row caching daemon (Listing 2.8): refresh scheduled rows as they
    come due. ``load(row_id)`` returns the row as a dict, or ``None`` when
    it no longer exists (the book's ``Inventory.get``); a
    :class:`~webtier.rows.sql.SqlSource` also works, and loads many rows a
    query. ``once=True`` refreshes what is due now and returns a report."""
    loader = load if isinstance(load, Source) else FunctionSource(BOOK_ROWS, load)
    base = tier_for(conn).config
    config = dataclasses.replace(
        base, rows=dataclasses.replace(base.rows, sources=(_BookRows(loader),))
    )
    tier = WebTier(conn, config)
    if once:
        return tier.rows.refresh_due()
    Worker(tier, [JOBS["rows"]], stop=stop).run()
    return None


def get_cached_row(conn: Any, row_id: object) -> dict[str, Any] | None:
    """The cached copy of row ``row_id`` as a dict, or ``None`` (the book
    reads ``inv:<row id>`` itself; this decodes it to the database's types)."""
    return tier_for(conn).rows.get(_ROWS, row_id)


# -- 5.2.2-5.2.3 statistics and access time ----------------------------------------------


def update_stats(
    conn: Any, context: str, type: str, value: float, timeout: float = 5
) -> list[float]:
    """Add ``value`` to the current hour's stats of (``context``, ``type``)
    and return ``[count, sum, sumsq]`` (Listing 5.6).

    One atomic script instead of the book's WATCH/MULTI retry loop, so there
    is no contention to wait out: ``timeout`` is accepted for the book's
    signature and never reached. The hour is the Redis server's."""
    recorded = tier_for(conn).stats.record(context, type, value)
    return [recorded.count, recorded.sum, recorded.sumsq]


def get_stats(conn: Any, context: str, type: str) -> dict[str, float | None]:
    """The current hour's ``min``, ``max``, ``count``, ``sum``, ``sumsq``,
    ``average`` and ``stddev`` (sample standard deviation, as the book
    computes it) of (``context``, ``type``) (Listing 5.7). With no value yet
    this hour, ``count`` is 0 and the others are 0 or None."""
    summary = tier_for(conn).stats.get(context, type)
    return {
        "min": summary.min,
        "max": summary.max,
        "count": summary.count,
        "sum": summary.sum,
        "sumsq": summary.sumsq,
        "average": summary.mean,
        "stddev": summary.stddev,
    }


def access_time(conn: Any, context: str) -> AccessTimer:
    """Time a ``with`` block as ``context``'s ``AccessTime``, even when it
    raises (Listing 5.8); :func:`slowest` ranks the contexts."""
    return tier_for(conn).stats.access_time(context)


def process_view(conn: Any, callback: Callable[[], T], *, path: str) -> T:
    """Run a view, timed as the context ``path`` (the book's
    ``request.path``; give a route template, not a raw path)."""
    with access_time(conn, path):
        return callback()


def slowest(conn: Any, n: int = 100) -> list[tuple[str, float]]:
    """The ``n`` contexts with the highest average ``AccessTime`` this hour,
    slowest first: the reader of ``slowest:AccessTime`` the book leaves out."""
    return tier_for(conn).stats.slowest(n)


# -- 2.5 item view ranking -----------------------------------------------------------------


def rescale_viewed(conn: Any, once: bool = False, *, stop: threading.Event | None = None) -> None:
    """The rescale daemon (Listing 2.10): once every 5 minutes keep the
    20,000 most viewed items and halve every count. The printed listing keeps
    the *least* viewed (an error of the listing); this keeps the most viewed. Periods follow
    the Redis server's clock and each is rescaled at most once, however many
    daemons run: ``once=True`` runs one pass, which does nothing if this
    period was rescaled already."""
    _daemon(conn, "ranking", once, stop)


def top_viewed(conn: Any, n: int) -> list[tuple[str, float]]:
    """The ``n`` most viewed items with their (rescaled) view counts, most
    viewed first: a reader the book leaves out."""
    return tier_for(conn).ranking.top(n)


def view_rank(conn: Any, item: str) -> int | None:
    """``item``'s place in the ranking, 0 = most viewed; None if it is not
    ranked (never viewed, or trimmed by a rescale)."""
    return tier_for(conn).ranking.rank(item)


# -- 2.3 page cache ------------------------------------------------------------------------


def can_cache(conn: Any, request: str) -> bool:
    """Whether the page at URL ``request`` may be cached (Listing 2.8): an
    item page (``item=<id>`` in its query), not dynamic (no ``_`` parameter),
    whose item ranks in the top 10,000 most viewed."""
    tier = tier_for(conn)
    plan = BOOK_RULES.plan(tier.config, PageRequest.from_url(request))
    if plan is None or plan.item is None:
        return False
    place = tier.ranking.rank(plan.item)
    return place is not None and place < tier.config.pagecache.top


def cache_request(conn: Any, request: str, callback: Callable[[str], str]) -> str:
    """The page at URL ``request``: from the cache, or ``callback(request)``,
    cached for 5 minutes when :func:`can_cache` allows (Listing 2.6). One
    render across processes on a miss; rendered uncached if Redis is down."""
    tier = tier_for(conn)
    plan = BOOK_RULES.plan(tier.config, PageRequest.from_url(request))
    if plan is None:
        return callback(request)

    def render() -> Rendered:
        content = callback(request).encode()
        headers = (("content-length", str(len(content))),)
        return Rendered(200, headers, content, tier.config.pagecache.ttl)

    try:
        served = tier.pagecache.serve(plan, Call(render))
    except RedisUnavailable:
        return callback(request)
    if served.page is not None:
        return served.page.plain_body().decode()
    assert served.rendered is not None
    return served.rendered.body.decode()


# -- 2.1-2.2 sessions and carts -----------------------------------------------------------

# The book's LIMIT: keep the newest 10 million sessions.
LIMIT = 10_000_000

_session_tiers: weakref.WeakKeyDictionary[Any, WebTier] = weakref.WeakKeyDictionary()


def _sessions_tier(conn: Any) -> WebTier:
    """The tier for the book's session functions: strict mode off, so the
    caller issues the tokens (``str(uuid.uuid4())``, as the book does) and
    ``update_token`` creates the session it is given."""
    with _lock:
        try:
            tier = _session_tiers.get(conn)
        except TypeError:  # as in tier_for
            return WebTier(conn, _SESSIONS_CONFIG)
        if tier is None:
            tier = _session_tiers[conn] = WebTier(conn, _SESSIONS_CONFIG)
        return tier


def check_token(conn: Any, token: str) -> str | None:
    """The user of a login token, or ``None`` (Listing 2.1)."""
    return _sessions_tier(conn).sessions.check(token)


def update_token(conn: Any, token: str, user: str, item: str | None = None) -> None:
    """Record the token's user and last-seen time, and the viewed ``item`` (the
    newest 25 kept, the view counted in the item ranking), in one round trip
    (Listings 2.2 and 2.9). Creates the session when it is new, as the book does."""
    _sessions_tier(conn).sessions.touch(token, user=user, item=item)


def _clean(conn: Any, limit: int, once: bool, stop: threading.Event | None) -> None:
    base = _sessions_tier(conn)
    config = dataclasses.replace(
        base.config, sessions=dataclasses.replace(base.config.sessions, limit=limit)
    )
    tier = WebTier(conn, config)
    if once:
        tier.sessions.clean()
        return
    Worker(tier, [JOBS["sessions"]], stop=stop).run()


def clean_sessions(
    conn: Any, limit: int = LIMIT, once: bool = False, *, stop: threading.Event | None = None
) -> None:
    """The session cleaner (Listing 2.3): keep the newest ``limit`` sessions.
    Never removes a session touched after it was picked (the book's race),
    and removes a session whole: viewed items and cart too. ``once=True``
    runs until the store is at or under the limit, then returns."""
    _clean(conn, limit, once, stop)


def clean_full_sessions(
    conn: Any, limit: int = LIMIT, once: bool = False, *, stop: threading.Event | None = None
) -> None:
    """The cleaner that also deletes carts (Listing 2.5): carts live in their
    session here, so this is :func:`clean_sessions`."""
    _clean(conn, limit, once, stop)


def add_to_cart(conn: Any, session: str, item: str, count: int) -> None:
    """Set ``item``'s count in the session's cart; ``count <= 0`` removes it
    (Listing 2.4)."""
    _sessions_tier(conn).carts.set(session, item, count)


def get_cart(conn: Any, session: str) -> dict[str, int]:
    """The session's cart, item -> count: the reader the book leaves out."""
    return _sessions_tier(conn).carts.get(session)


def recently_viewed(conn: Any, token: str) -> list[str]:
    """The token's recently viewed items, newest first: the reader the book leaves out."""
    return _sessions_tier(conn).sessions.recently_viewed(token)
