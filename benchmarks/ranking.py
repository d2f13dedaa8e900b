"""The ranking benchmark: what the hot key's client-side helpers buy, against
the book's own round trips (:mod:`benchmarks.book`), on the same server.

Rows (docs/benchmarks.md says more):

* views, direct -- ``tier.ranking.record_view(item)``, one ZINCRBY round trip
  a view, vs the book's ZINCRBY of ``update_token``; 1 and N processes, next
  to redis-benchmark's ZINCRBY;
* views, aggregated -- ``tier.ranking.view_requests(item)`` with an
  aggregator open (counted in process, one ZINCRBY per distinct item a
  flush) vs the same book port;
* admission, cached top N -- ``top.admits(item)`` on the client-side copy of
  the top 10,000 vs the book's ZRANK of ``can_cache``; next to
  redis-benchmark's ZREVRANK;
* admission, ZREVRANK per request -- ``tier.ranking.rank(item)`` vs the same;
* rescale, one pass -- ``tier.ranking.rescale()`` (one fenced script) vs one
  pass of the book's ``rescale_viewed`` (two commands), over 100,000 items;
* shards vs one key -- views, ranks and tops of a ranking in 12 shards
  (Redis Cluster's default) against webtier's one key (the book's layout,
  the default on a single server), both on the single server.

Server µs per operation (commandstats) is what the one hot slot pays: on
Cluster it is the load on the node that holds the ranking.
"""

from __future__ import annotations

from functools import partial

from benchmarks import _ranking_workloads as w
from benchmarks import book
from benchmarks._counter_workloads import client_on, tier_on
from benchmarks._harness import Contender, Harness, Pass
from benchmarks._loops import Workload
from benchmarks._results import Measurement, Row
from webtier.config import CLUSTER_RANKING_SHARDS, Config

TITLE = "webtier bench ranking"

FLUSH = 1.0  # seconds, the aggregator's default
RANKED_ITEMS = 20_000  # items in the ranking for admission checks (the kept 20,000)
RESCALED_ITEMS = 100_000  # items in the ranking a rescale pass trims to 20,000

VIEW_COMMANDS = frozenset({"zincrby"})
# EVALSHA's time holds the commands its script runs (listed again under their names).
WEBTIER_RESCALE_COMMANDS = frozenset({"evalsha"})
BOOK_RESCALE_COMMANDS = frozenset({"zremrangebyrank", "zinterstore"})
RANK_COMMANDS = frozenset({"zrank", "zrevrank", "zrevrange"})  # zrevrange: the copy's refresh
SHARDED_READS = frozenset({"zrevrank", "zscore", "zcount", "zrevrange"})

AGGREGATED_NOTE = (
    f"views summed in process, flushed every {FLUSH:g} s as one ZINCRBY per "
    "distinct item in one round trip (the closing flush is timed); Zipf-distributed views "
    f"over {w.CATALOGUE:,} items"
)
CACHED_NOTE = (
    f"a dict lookup in a copy of the top {w.TOP:,} refreshed every 5 s by a thread; "
    f"ranking of {RANKED_ITEMS:,} items, half the checked items in the top"
)


def run(h: Harness) -> list[Row]:
    """Every ranking comparison, in the order of the report."""
    rows: list[Row] = []
    url, book_url = h.server.url, h.server.book_url
    raw_views = {n: _raw(h, "ZINCRBY", n) for n in h.settings.processes}
    for n in h.settings.processes:
        h.server.flush()
        direct, aggregated, theirs = _sides(
            h,
            n,
            "views/s",
            VIEW_COMMANDS,
            ("webtier record_view", partial(w.webtier_direct, url)),
            ("webtier view_requests, aggregator open", partial(w.webtier_aggregated, url, FLUSH)),
            ("book ZINCRBY (update_token)", partial(w.book_views, book_url)),
        )
        raw, unit = raw_views[n], "views/s"
        rows.append(Row("views, direct ZINCRBY", unit, n, direct, theirs, raw=raw))
        note = AGGREGATED_NOTE
        rows.append(Row("views, aggregated", unit, n, aggregated, theirs, raw, note=note))
    h.server.flush()
    w.load_rankings(url, book_url, h.settings.size(RANKED_ITEMS))
    raw_ranks = {n: _raw(h, "ZREVRANK", n) for n in h.settings.processes}
    for n in h.settings.processes:
        cached, uncached, theirs = _sides(
            h,
            n,
            "checks/s",
            RANK_COMMANDS,
            ("webtier top.admits (cached top N)", partial(w.webtier_cached_top, url)),
            ("webtier ranking.rank", partial(w.webtier_rank, url)),
            ("book ZRANK (can_cache)", partial(w.book_admission, book_url)),
        )
        raw, unit = raw_ranks[n], "checks/s"
        rows.append(Row("admission, cached top N", unit, n, cached, theirs, raw, note=CACHED_NOTE))
        rows.append(Row("admission, ZREVRANK per request", unit, n, uncached, theirs, raw))
    rows.append(_rescale(h))
    rows += _one_key_or_shards(h)
    h.server.flush()
    return rows


# -- the ranking's layout on one server: the book's one key against 12 shards ----------

SHARDS = CLUSTER_RANKING_SHARDS
SHARDS_NOTE = (
    f"the book column is webtier with the book's one key (shards=1); webtier's is "
    f"{SHARDS} shards, Redis Cluster's default, on the same single server"
)


def _one_key_or_shards(h: Harness) -> list[Row]:
    """What splitting the ranking costs on a single server, where no slot
    is hot: views, ranks and tops with one key and with 12 shards."""
    rows: list[Row] = []
    url = h.server.url
    h.server.flush()
    for n in h.settings.processes:
        sharded, one = _sides(
            h,
            n,
            "views/s",
            VIEW_COMMANDS | WEBTIER_RESCALE_COMMANDS,  # the upkeep rides on views
            (f"record_view, {SHARDS} shards", partial(w.views_in_shards, url, SHARDS)),
            ("record_view, one key", partial(w.views_in_shards, url, 1)),
        )
        rows.append(Row("views, shards vs one key", "views/s", n, sharded, one, note=SHARDS_NOTE))
    h.server.flush()
    size = h.settings.size(RANKED_ITEMS)
    for shards in (1, SHARDS):
        w.load_rankings(url, h.server.book_url, size, shards)
    for n in h.settings.processes:
        sharded, one = _sides(
            h,
            n,
            "checks/s",
            SHARDED_READS,
            (f"rank, {SHARDS} shards", partial(w.rank_in_shards, url, SHARDS)),
            ("rank, one key", partial(w.rank_in_shards, url, 1)),
        )
        rows.append(Row("rank, shards vs one key", "checks/s", n, sharded, one, note=SHARDS_NOTE))
    for top in (100, w.TOP):
        sharded, one = _sides(
            h,
            1,
            "tops/s",
            SHARDED_READS,
            (f"top({top}), {SHARDS} shards", partial(w.top_in_shards, url, SHARDS, top)),
            (f"top({top}), one key", partial(w.top_in_shards, url, 1, top)),
        )
        what = f"top {top:,}, shards vs one key"
        rows.append(Row(what, "tops/s", 1, sharded, one, note=SHARDS_NOTE))
    return rows


def _rescale(h: Harness) -> Row:
    size = h.settings.size(RESCALED_ITEMS)

    def prepare() -> None:
        h.server.flush()  # the fence too: every pass rescales
        w.load_rankings(h.server.url, h.server.book_url, size)

    with tier_on(h.server.url) as tier, client_on(h.server.book_url) as conn:

        def ours() -> int:
            if not tier.ranking.rescale().done:
                raise RuntimeError("the bench's rescale found its period rescaled already")
            return size

        def theirs() -> int:
            book.rescale_viewed_pass(conn)
            return size

        unit = "items/s"
        ours_m, theirs_m = h.passes(
            [
                Pass("webtier ranking.rescale", prepare, ours, WEBTIER_RESCALE_COMMANDS),
                Pass("book rescale_viewed", prepare, theirs, BOOK_RESCALE_COMMANDS),
            ],
            unit,
        )
        kept = conn.zcard("viewed:")
    note = (
        f"{size:,} items trimmed to the 20,000 most viewed and halved; the book's pass, "
        f"as printed, kept the {kept:,} least viewed instead"
    )
    return Row("rescale, one pass", unit, 1, ours_m, theirs_m, note=note)


def _sides(
    h: Harness, processes: int, unit: str, commands: frozenset[str], *sides: tuple[str, Workload]
) -> list[Measurement]:
    """Each side's rate, in turns; the server time of ``commands`` per operation."""
    contenders = [Contender(name, workload, commands) for name, workload in sides]
    return h.loops(contenders, processes, unit=unit)


def _raw(h: Harness, command: str, clients: int) -> Measurement | None:
    """redis-benchmark sending webtier's own ZINCRBY or ZREVRANK."""
    (shard,) = Config().keys.ranking(1)
    args = (
        ("ZINCRBY", shard.viewed, 1, w.VIEWS[0])
        if command == "ZINCRBY"
        else ("ZREVRANK", shard.viewed, w.CHECKS[0])
    )
    return h.raw(f"raw: {command}", [(args, 1)], clients, h.server.admin)
