"""Item view ranking (Redis in Action 2.5), split over shards by item.

Every item view adds to the item's score in one zset: with one shard the
book's ``<prefix>:{v}:viewed``; with ``N`` shards (:class:`~webtier.config.
RankingSettings`), the zset of the item's shard
(:func:`~webtier._core.keys.item_shard`), each shard under a hash tag of its
own so that on Redis Cluster no one slot takes every view. Shards partition
the items, so the ranking reads stay exact: :func:`top` merges each shard's
top, :func:`rank` counts the higher scores of every shard.

The order across shards: most views first; items of equal views by shard
number, then as Redis orders them within a shard (``ZREVRANGE``: member
bytes, descending). With one shard that is exactly ``ZREVRANGE``'s order.

Other capabilities count views through :func:`view_requests` (a session's
touch counts it inside its own script on a single server, where the book
counts the view inside ``update_token``). Once a period :func:`rescale`
keeps each shard's most viewed items and halves every count; between
rescales, and with no worker at all, the upkeep sent with every 64th view of
a shard (:func:`upkeep_request`) trims that shard at twice its keep limit
and moves its expiry. See docs/ranking.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from webtier._core.checks import check_limit
from webtier._core.keys import RankingShard, check_name, item_shard
from webtier._core.protocol import (
    Command,
    Gather,
    Op,
    Reply,
    Request,
    ScriptCall,
    pairs,
    read,
    text,
    write,
)
from webtier._core.scripts import Script
from webtier.config import Config
from webtier.errors import WebtierError
from webtier.types import RescaleReport

RESCALE = Script.load(__package__, "ranking_rescale")
UPKEEP = Script.load(__package__, "ranking_upkeep")

Entry = tuple[str, int]  # item, views
# One item of a merged top: (-score, shard, place in the shard, item, score);
# sorting these gives the ranking's order.
_Ranked = tuple[float, int, int, str, float]


def shards_of(cfg: Config) -> tuple[RankingShard, ...]:
    """The keys of every shard of ``cfg``'s ranking. A tier's config always
    has its shard count decided (:meth:`Config.for_client`); a config that
    left it to the client and reaches an operation directly counts as one."""
    return cfg.keys.ranking(cfg.ranking.shards or 1)


def shard_for(cfg: Config, item: str) -> RankingShard:
    """The shard holding ``item`` (a checked name)."""
    shards = shards_of(cfg)
    return shards[item_shard(item, len(shards))]


# -- counting views --------------------------------------------------------------------


def view_requests(
    cfg: Config, item: str, views: int = 1, *, upkeep: bool = False
) -> tuple[Request, ...]:
    """The requests that count ``views`` views of ``item`` (checked first)
    in its shard, with that shard's upkeep when ``upkeep``.

    Not idempotent: a lost reply is not sent again, as a view counted twice is
    worse than one missed."""
    check_name("item", item)
    shard = shard_for(cfg, item)
    count: Command = ("ZINCRBY", shard.viewed, views, item)
    if upkeep:
        return (write(shard.route, count, upkeep_call(cfg, shard), idempotent=False),)
    return (write(shard.route, count, idempotent=False),)


def upkeep_call(cfg: Config, shard: RankingShard) -> ScriptCall:
    """Trim ``shard`` at twice its keep limit, move its expiry (idempotent)."""
    settings = cfg.ranking
    return ScriptCall(UPKEEP, (shard.viewed,), (settings.keep, settings.expire_after * 1000))


def upkeep_request(cfg: Config, shard: RankingShard) -> Request:
    return write(shard.route, upkeep_call(cfg, shard), idempotent=True)


def record_view(cfg: Config, item: str) -> Op[None]:
    """Count one view of ``item``."""
    yield view_requests(cfg, item)


def send(requests: tuple[Request, ...]) -> Op[None]:
    """Send what :func:`view_requests` returned (nothing when it was empty)."""
    if requests:
        yield requests


def record_many(
    cfg: Config, entries: Sequence[Entry]
) -> Op[list[tuple[list[Entry], WebtierError | None]]]:
    """Add already-checked ``(item, views)`` sums, one request per shard
    (the requests for one node go in one round trip: the aggregator's
    flush). Returns each shard's entries with ``None``, or the error that
    stopped them: a :class:`~webtier.errors.RedisUnavailable` that is not an
    ``OutcomeUnknown`` means none of them was applied."""
    by_shard: dict[RankingShard, list[Entry]] = {}
    for item, views in entries:
        by_shard.setdefault(shard_for(cfg, item), []).append((item, views))
    if not by_shard:
        return []
    requests = []
    for shard, found in by_shard.items():
        commands = tuple(("ZINCRBY", shard.viewed, views, item) for item, views in found)
        # A flush comes once a second at most: each carries its shards' upkeep.
        call = upkeep_call(cfg, shard)
        requests.append(write(shard.route, *commands, call, idempotent=False))
    replies = yield Gather(tuple(requests))
    return [
        (found, reply if isinstance(reply, WebtierError) else None)
        for found, reply in zip(by_shard.values(), replies, strict=True)
    ]


# -- reading the ranking -------------------------------------------------------------------


def rank_request(cfg: Config, item: str) -> Request:
    """The first read of ``item``'s place, to its own shard: its place there
    (``ZREVRANK``) and, with several shards, its score, which
    :func:`rank_follow_up` compares the other shards' with. Operations that
    need the rank in their own round trip (the page cache) send it there."""
    check_name("item", item)
    shard = shard_for(cfg, item)
    if len(shards_of(cfg)) == 1:
        return read(shard.route, ("ZREVRANK", shard.viewed, item))
    return read(shard.route, ("ZREVRANK", shard.viewed, item), ("ZSCORE", shard.viewed, item))


def rank_follow_up(cfg: Config, item: str, first: Sequence[Reply]) -> tuple[Request, ...]:
    """The counts of the other shards' items ranked before ``item``, given
    the replies of :func:`rank_request`; none when it decided (one shard, or
    the item is not ranked). One read per shard: the wire sends those of one
    node in one round trip, every node at once."""
    shards = shards_of(cfg)
    if len(shards) == 1 or first[0] is None:
        return ()
    score = float(first[1])
    home = item_shard(item, len(shards))
    # Equal scores: the lower shards' items come first (see the module's order).
    at_least, above = f"{score!r}", f"({score!r}"
    return tuple(
        read(shard.route, ("ZCOUNT", shard.viewed, at_least if j < home else above, "+inf"))
        for j, shard in enumerate(shards)
        if j != home
    )


def decode_rank(first: Sequence[Reply], rest: Sequence[Sequence[Reply]] = ()) -> int | None:
    """The place from the replies of :func:`rank_request` and of its follow-up."""
    if first[0] is None:
        return None
    return int(first[0]) + sum(int(replies[0]) for replies in rest)


def rank(cfg: Config, item: str) -> Op[int | None]:
    """``item``'s place in the ranking, 0 = most viewed; None if not ranked.
    One round trip with one shard; with several, a second one to every node
    holding the other shards (at once)."""
    first = yield rank_request(cfg, item)
    follow_up = rank_follow_up(cfg, item, first)
    rest = (yield follow_up) if follow_up else ()
    return decode_rank(first, rest)


def top(cfg: Config, n: int = 10) -> Op[list[tuple[str, float]]]:
    """The ``n`` most viewed items with their view counts, most viewed first."""
    if check_limit("n", n) == 0:
        return []
    shards = shards_of(cfg)
    if len(shards) == 1:
        (shard,) = shards
        (reply,) = yield read(shard.route, ("ZREVRANGE", shard.viewed, 0, n - 1, "WITHSCORES"))
        return [(text(item), float(score)) for item, score in pairs(reply)]
    return [(item, score) for *_, item, score in (yield from _merged_top(shards, n))]


def top_items(cfg: Config, n: int) -> Op[list[str]]:
    """The ``n`` most viewed items, most viewed first, without their counts."""
    check_limit("n", n, 1)
    shards = shards_of(cfg)
    if len(shards) == 1:
        (shard,) = shards
        (reply,) = yield read(shard.route, ("ZREVRANGE", shard.viewed, 0, n - 1))
        return [text(item) for item in reply]
    return [item for *_, item, _ in (yield from _merged_top(shards, n))]


def _merged_top(shards: tuple[RankingShard, ...], n: int) -> Op[list[_Ranked]]:
    """The ``n`` first items of the merged shards, exactly, reading about
    ``2n`` items in all where one shard at a time would read ``n`` of each.

    First every shard's top ``ceil(2n / shards)`` (an even spread puts
    ``n / shards`` of the top in each). A shard can hold more of the top
    only if it gave all it was asked for and its last item made the merged
    top: those shards alone are read again, up to ``n`` items each, which
    settles it (a shard's next items come after its last one)."""
    asked = [min(n, -(-2 * n // len(shards)))] * len(shards)
    fetched: list[list[tuple[str, float]]] = [[] for _ in shards]
    wanted = list(range(len(shards)))
    while wanted:
        replies = yield tuple(
            read(
                shards[j].route,
                ("ZREVRANGE", shards[j].viewed, len(fetched[j]), asked[j] - 1, "WITHSCORES"),
            )
            for j in wanted
        )
        for j, (reply,) in zip(wanted, replies, strict=True):
            fetched[j] += [(text(item), float(score)) for item, score in pairs(reply)]
        merged = sorted(
            (-score, j, place, item, score)
            for j, items in enumerate(fetched)
            for place, (item, score) in enumerate(items)
        )[:n]
        last_in_top = {(j, place) for _, j, place, _, _ in merged}
        wanted = [
            j
            for j, items in enumerate(fetched)
            if asked[j] < n and len(items) == asked[j] and (j, len(items) - 1) in last_in_top
        ]
        for j in wanted:
            asked[j] = n
    return merged


# -- rescale ---------------------------------------------------------------------------


def rescale(cfg: Config) -> Op[RescaleReport]:
    """Keep each shard's ``keep`` most viewed items and multiply every count
    by ``factor``, in every shard whose current period (server clock) was
    not rescaled yet: each shard has its own fence, so this is safe to run
    from any number of workers at once. One script call per shard; the
    calls for one node go in one round trip."""
    settings = cfg.ranking
    factor = "1" if settings.factor == 1 else repr(float(settings.factor))
    args = (settings.interval, settings.keep, factor, settings.expire_after * 1000)
    # Fenced by period, so sending one again after a lost reply is harmless;
    # a failure raises, and running the rescale again completes the rest.
    calls = [(s.route, ScriptCall(RESCALE, (s.viewed, s.rescaled), args)) for s in shards_of(cfg)]
    replies = yield tuple(write(route, call, idempotent=True) for route, call in calls)
    found = [[int(value) for value in reply] for (reply,) in replies]
    done = [report for report in found if report[0]]
    return RescaleReport(
        done=bool(done),
        period=max(report[1] for report in found),
        removed=sum(report[2] for report in done),
        left=sum(report[3] for report in done),
        next_in=min(report[4] for report in found) / 1000,
        shards=len(done),
    )
