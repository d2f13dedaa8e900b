"""Item view ranking (Redis in Action 2.5).

Every item view adds to the item's score in one zset, ``<prefix>:{v}:viewed``.
Other capabilities count views through :func:`view_requests` (a session's
touch counts it inside its own script on a single server, where the book
counts the view inside ``update_token``). Once a period
(:class:`~webtier.config.RankingSettings`) :func:`rescale` keeps the most
viewed items and halves every count; between rescales, and with no worker at
all, the upkeep sent with every 64th view (:func:`upkeep_request`) trims the
ranking at twice its keep limit and moves its expiry. See docs/ranking.md for
the layout, the rescale's fence and the hot key.
"""

from __future__ import annotations

from collections.abc import Sequence

from webtier._core.checks import check_limit
from webtier._core.keys import check_name
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

RESCALE = Script.load("ranking_rescale")
UPKEEP = Script.load("ranking_upkeep")

Entry = tuple[str, int]  # item, views


def view_requests(
    cfg: Config, item: str, views: int = 1, *, upkeep: bool = False
) -> tuple[Request, ...]:
    """The requests that count ``views`` views of ``item`` (checked first),
    with the ranking's upkeep when ``upkeep``.

    Not idempotent: a lost reply is not sent again, as a view counted twice is
    worse than one missed."""
    check_name("item", item)
    keys = cfg.keys
    count: Command = ("ZINCRBY", keys.viewed, views, item)
    if upkeep:
        return (write(keys.ranking_route, count, upkeep_call(cfg), idempotent=False),)
    return (write(keys.ranking_route, count, idempotent=False),)


def upkeep_call(cfg: Config) -> ScriptCall:
    """Trim the ranking at twice its keep limit, move its expiry (idempotent)."""
    settings = cfg.ranking
    return ScriptCall(UPKEEP, (cfg.keys.viewed,), (settings.keep, settings.expire_after * 1000))


def upkeep_request(cfg: Config) -> Request:
    return write(cfg.keys.ranking_route, upkeep_call(cfg), idempotent=True)


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
    """Add already-checked ``(item, views)`` sums in one round trip (the
    aggregator's flush). Returns the entries with ``None``, or the error that
    stopped them: a :class:`~webtier.errors.RedisUnavailable` that is not an
    ``OutcomeUnknown`` means nothing was applied."""
    if not entries:
        return []
    keys = cfg.keys
    commands = tuple(("ZINCRBY", keys.viewed, views, item) for item, views in entries)
    # A flush comes once a second at most: each carries the upkeep.
    request = write(keys.ranking_route, *commands, upkeep_call(cfg), idempotent=False)
    (reply,) = yield Gather((request,))
    return [(list(entries), reply if isinstance(reply, WebtierError) else None)]


def rank_request(cfg: Config, item: str) -> Request:
    """The read whose one reply :func:`decode_rank` turns into ``item``'s place,
    for operations that need the rank in their own round trip (page cache)."""
    check_name("item", item)
    return read(cfg.keys.ranking_route, ("ZREVRANK", cfg.keys.viewed, item))


def decode_rank(reply: Reply) -> int | None:
    return None if reply is None else int(reply)


def rank(cfg: Config, item: str) -> Op[int | None]:
    """``item``'s place in the ranking, 0 = most viewed; None if never viewed."""
    (place,) = yield rank_request(cfg, item)
    return decode_rank(place)


def top(cfg: Config, n: int = 10) -> Op[list[tuple[str, float]]]:
    """The ``n`` most viewed items with their view counts, most viewed first."""
    if check_limit("n", n) == 0:
        return []
    (reply,) = yield read(
        cfg.keys.ranking_route, ("ZREVRANGE", cfg.keys.viewed, 0, n - 1, "WITHSCORES")
    )
    return [(text(item), float(score)) for item, score in pairs(reply)]


def top_items(cfg: Config, n: int) -> Op[list[str]]:
    """The ``n`` most viewed items, most viewed first, without their counts."""
    check_limit("n", n, 1)
    (reply,) = yield read(cfg.keys.ranking_route, ("ZREVRANGE", cfg.keys.viewed, 0, n - 1))
    return [text(item) for item in reply]


# -- rescale ---------------------------------------------------------------------------


def rescale(cfg: Config) -> Op[RescaleReport]:
    """Keep the ``keep`` most viewed items and multiply every count by
    ``factor``, unless the current period (server clock) was rescaled
    already: safe to run from any number of workers at once."""
    settings, keys = cfg.ranking, cfg.keys
    factor = "1" if settings.factor == 1 else repr(float(settings.factor))
    args = (settings.interval, settings.keep, factor, settings.expire_after * 1000)
    call = ScriptCall(RESCALE, (keys.viewed, keys.rescaled), args)
    # Fenced by period, so sending it again after a lost reply is harmless.
    ((done, period, removed, left, next_ms),) = yield write(
        keys.ranking_route, call, idempotent=True
    )
    return RescaleReport(bool(done), int(period), int(removed), int(left), int(next_ms) / 1000)
