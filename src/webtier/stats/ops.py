"""Statistics per (context, type) and period (Redis in Action, 5.2.2-5.2.3).

Layout, per context, in the shard ``crc32(context) % shards``:

* one hash per (context, type, period), ``<prefix>:{s:<shard>}:<period
  length>:<period start>:<type>:<context>``, holding count, sum, m2, min,
  max, errors and the histogram's buckets;
* one set per (type, period) for ranked types, ``<prefix>:{s:<shard>}:ctx:
  <period length>:<period start>:<type>``: the shard's contexts, up to
  ``rank_limit``, that rankings read.

Recording is one script in one slot. The period is the one the *server's*
clock is in: the caller guesses it from its own clock, and the script refuses
a wrong guess (writing nothing) and names the right one. Every key expires
``keep`` periods after its own, so memory stays bounded with no cleaner.

Rankings are computed when read, from the records themselves: exact (the
book's trimmed zset forgets a context that was fast when trimmed and slow
afterwards), by any statistic (mean, max, any percentile), over any number
of periods merged, and free for writers, which only list a context on its
first value of a period.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from webtier._core.checks import check_limit, check_real
from webtier._core.keys import check_name, check_names, check_stat_type, shard_of
from webtier._core.protocol import Command, Op, Reply, Request, ScriptCall, pairs, read, text, write
from webtier._core.scripts import Script
from webtier.config import ACCESS_TIME, Config, StatsSettings
from webtier.errors import InvalidInput, ServerError
from webtier.stats.histogram import Histogram, bucket_of, check_percent, is_bucket
from webtier.types import Recorded, Summary

RECORD = Script.load(__package__, "stats_record", prelude="stats_prelude")

# Values beyond this lose their squares' precision (and 1e300 squared is inf).
MAX_VALUE: Final = 1e15
# The caller's clock only guesses the period; the server's decides. A guess
# is wrong only around the turn of a period (or on a skewed clock), so two
# corrections are plenty; more means the server's clock jumps about.
_GUESSES: Final = 3
_SUMMARY_FIELDS = (b"count", b"sum", b"m2", b"min", b"max", b"errors")
_SUMMARY = frozenset(_SUMMARY_FIELDS)


# -- values ------------------------------------------------------------------------------


# -- argument checks ---------------------------------------------------------------------


def check_value(value: object, stat_type: str, settings: StatsSettings) -> float:
    """A finite number (int, float, Fraction, Decimal...) within +/-1e15; not
    negative for the types that forbid it."""
    number = check_real("value", value, -MAX_VALUE, MAX_VALUE)
    if number < 0 and stat_type in settings.non_negative:
        raise InvalidInput("value", f"must not be negative for {stat_type}", value)
    return number


def _check_periods(settings: StatsSettings, periods: object) -> int:
    return check_limit("periods", periods, 1, settings.keep + 1)


def period_start(settings: StatsSettings, now: float) -> int:
    return int(now // settings.period) * settings.period


# -- recording ---------------------------------------------------------------------------


def _record_request(
    cfg: Config, context: str, stat_type: str, value: float, failed: bool, start: int
) -> Request:
    settings = cfg.stats
    route = cfg.keys.stats_shard(shard_of(context, settings.shards))
    keys = [cfg.keys.stats(route, settings.period, start, stat_type, context)]
    bucket = bucket_of(value, settings.sub_buckets) if settings.histograms else ""
    args: list[str | int] = [
        settings.period, start, settings.keep, repr(value), bucket, "1" if failed else "0"
    ]  # fmt: skip
    if stat_type in settings.ranked:
        keys.append(cfg.keys.stats_contexts(route, settings.period, start, stat_type))
        args += [context, settings.rank_limit]
    return write(route, ScriptCall(RECORD, tuple(keys), tuple(args)), idempotent=False)


def record(
    cfg: Config, context: str, type: str, value: float, *, failed: bool = False
) -> Op[Recorded]:
    """Add ``value`` to the stats of (``context``, ``type``) for the current
    period of the server's clock, atomically, in one round trip;
    ``failed=True`` also counts it as an error.

    Not idempotent: a reply lost after sending raises
    :class:`~webtier.errors.OutcomeUnknown`, and the value is never sent twice."""
    check_name("context", context)
    check_stat_type(type)
    number = check_value(value, type, cfg.stats)
    start = period_start(cfg.stats, cfg.clock.wall())
    for _ in range(_GUESSES):
        ((applied, *rest),) = yield _record_request(cfg, context, type, number, failed, start)
        if int(applied) == 1:
            count, total, m2 = rest
            return Recorded(start, int(count), float(total), float(m2))
        start = int(rest[0])  # not written: the server's period starts there
    raise ServerError("the server's clock kept moving between periods; nothing was recorded")


# -- reading -----------------------------------------------------------------------------


def _starts(settings: StatsSettings, current: int, periods: int) -> list[int]:
    return [current - k * settings.period for k in range(periods)]


def _server_period(
    cfg: Config, build: Callable[[int], list[Request]], current: int | None = None
) -> Op[tuple[int, list[list[Reply]]]]:
    """Replies to ``build(start)``, where ``start`` is the server's current
    period (``current`` when the caller knows it already): TIME rides along
    with a guess, and a wrong guess is read again."""
    if current is not None:
        return current, list((yield tuple(build(current))))
    settings = cfg.stats
    guess = period_start(settings, cfg.clock.wall())
    requests = build(guess)
    first = requests[0]
    # TIME reads: the probe writes only if the requests it joins do.
    probe = Request(first.route, (*first.commands, ("TIME",)), idempotent=True, writes=first.writes)
    replies = list((yield (probe, *requests[1:])))
    server = period_start(settings, int(replies[0][-1][0]))
    if server == guess:
        replies[0] = replies[0][:-1]
        return guess, replies
    return server, list((yield tuple(build(server))))


def _summary(
    settings: StatsSettings,
    context: str,
    stat_type: str,
    start: int,
    fields: dict[bytes, Reply],
    whole: bool,
) -> Summary:
    if not fields:
        return Summary(context, stat_type, start, 1)
    histogram = None
    if whole:
        names = (text(name) for name in fields if name not in _SUMMARY)
        buckets = {name: int(fields[name.encode()]) for name in names if is_bucket(name)}
        histogram = Histogram(settings.sub_buckets, buckets)
    try:
        return Summary(
            context,
            stat_type,
            start,
            1,
            int(fields[b"count"]),
            float(fields[b"sum"]),
            float(fields[b"m2"]),
            float(fields[b"min"]),
            float(fields[b"max"]),
            int(fields.get(b"errors") or 0),
            histogram,
        )
    except (KeyError, ValueError) as error:
        raise ServerError(f"malformed stats record of {context!r}: {error!r}") from error


def _fields(reply: Reply, whole: bool) -> dict[bytes, Reply]:
    """A record's fields from HGETALL (``whole``) or HMGET of the summary."""
    if whole:
        return dict(pairs(reply))
    return {name: value for name, value in zip(_SUMMARY_FIELDS, reply, strict=True) if value}


def _series(
    cfg: Config,
    contexts: Sequence[str],
    stat_type: str,
    periods: int,
    histograms: bool = True,
    current: int | None = None,
) -> Op[dict[str, list[Summary]]]:
    """Per context, its summaries of the newest ``periods`` periods, oldest
    first; without the histograms (HMGET of the summary) unless asked."""
    settings = cfg.stats
    whole = histograms and settings.histograms
    groups: dict[int, list[str]] = defaultdict(list)
    for context in contexts:
        groups[shard_of(context, settings.shards)].append(context)

    def read_record(key: str) -> Command:
        return ("HGETALL", key) if whole else ("HMGET", key, *_SUMMARY_FIELDS)

    def build(current: int) -> list[Request]:
        starts = _starts(settings, current, periods)
        requests = []
        for shard, names in groups.items():
            route = cfg.keys.stats_shard(shard)
            requests.append(
                read(route, *(
                    read_record(cfg.keys.stats(route, settings.period, s, stat_type, c))
                    for c in names for s in starts
                ))
            )  # fmt: skip
        return requests

    current, replies = yield from _server_period(cfg, build, current)
    starts = _starts(settings, current, periods)
    found: dict[str, list[Summary]] = {}
    for names, group_replies in zip(groups.values(), replies, strict=True):
        flat = iter(group_replies)
        for context in names:
            newest_first = [
                _summary(settings, context, stat_type, s, _fields(next(flat), whole), whole)
                for s in starts
            ]
            found[context] = newest_first[::-1]
    return found


def series_many(
    cfg: Config, contexts: Iterable[str], type: str, periods: int = 1
) -> Op[dict[str, list[Summary]]]:
    """Per context, one summary per period, the newest ``periods`` of them
    (the current one included), oldest first: one round trip per node."""
    check_stat_type(type)
    _check_periods(cfg.stats, periods)
    wanted = list(dict.fromkeys(check_names("contexts", contexts)))
    if not wanted:
        return {}
    found = yield from _series(cfg, wanted, type, periods)
    return {context: found[context] for context in wanted}


def series(cfg: Config, context: str, type: str, periods: int = 1) -> Op[list[Summary]]:
    """One summary per period, the newest ``periods`` of them, oldest first."""
    return (yield from series_many(cfg, [context], type, periods))[context]


def _merged(per_period: Sequence[Summary]) -> Summary:
    merged = per_period[0]
    for summary in per_period[1:]:
        merged = merged.merge(summary)
    return merged


def get_many(
    cfg: Config, contexts: Iterable[str], type: str, periods: int = 1
) -> Op[dict[str, Summary]]:
    """:func:`get` for several contexts at once: one round trip per node."""
    found = yield from series_many(cfg, contexts, type, periods)
    return {context: _merged(summaries) for context, summaries in found.items()}


def get(cfg: Config, context: str, type: str, periods: int = 1) -> Op[Summary]:
    """The stats of (``context``, ``type``) over the newest ``periods``
    periods merged, the current one included (``periods=1``: the current
    period only; with the defaults, ``periods=25`` is the last full day)."""
    return (yield from get_many(cfg, [context], type, periods))[context]


def _scorer(by: object) -> tuple[Callable[[Summary], float | None], bool]:
    """How to score a summary for ``by`` ("mean", "max" or "p<percent>"), and
    whether that needs the histograms."""
    if by == "mean":
        return (lambda s: s.mean), False
    if by == "max":
        return (lambda s: s.max), False
    if isinstance(by, str) and by.startswith("p"):
        try:
            percent = check_percent(float(by[1:]))
        except (ValueError, InvalidInput):
            pass
        else:
            return (lambda s: s.percentile(percent)), True
    raise InvalidInput("by", 'must be "mean", "max" or a percentile such as "p95"', by)


def slowest(
    cfg: Config, n: int = 100, type: str = ACCESS_TIME, periods: int = 1, by: str = "mean"
) -> Op[list[tuple[str, float]]]:
    """The ``n`` contexts of a ranked type (``AccessTime``) with the highest
    ``by`` ("mean", "max", or a percentile such as "p95", which needs
    histograms) over the newest ``periods`` periods merged, slowest first, as
    ``(context, score)``. Exact: scored from every listed context's records.
    Two round trips per node."""
    settings = cfg.stats
    check_stat_type(type)
    _check_periods(settings, periods)
    check_limit("n", n, 1)
    if type not in settings.ranked:
        raise InvalidInput("type", f"is not ranked (ranked: {sorted(settings.ranked)})", type)
    score, needs_histograms = _scorer(by)
    if needs_histograms and not settings.histograms:
        raise InvalidInput("by", "a percentile needs histograms (StatsSettings.histograms)", by)

    def build(current: int) -> list[Request]:
        starts = _starts(settings, current, periods)
        requests = []
        for shard in range(settings.shards):
            route = cfg.keys.stats_shard(shard)
            requests.append(
                read(route, *(
                    ("SMEMBERS", cfg.keys.stats_contexts(route, settings.period, s, type))
                    for s in starts
                ))
            )  # fmt: skip
        return requests

    current, replies = yield from _server_period(cfg, build)
    listed = sorted({text(m) for shard in replies for members in shard for m in members})
    if not listed:
        return []
    found = yield from _series(cfg, listed, type, periods, needs_histograms, current)
    scores = []
    for context, summaries in found.items():
        value = score(_merged(summaries))
        if value is not None:
            scores.append((context, value))
    scores.sort(key=lambda item: (-item[1], item[0]))
    return scores[:n]
