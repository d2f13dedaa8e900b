"""Time-series counters at several precisions (Redis in Action, 5.2.1).

Layout, per counter name, in the shard ``crc32(name) % shards``:

* one hash per precision, ``<prefix>:{c:<shard>}:<seconds>:<name>``, mapping
  each slice start (an int, seconds since the epoch) to its count;
* one index per shard, ``<prefix>:{c:<shard>}:known``, a zset of the names
  with data, scored by the server time (ms) of their last new slice.

Everything a counter touches shares the shard's hash tag, so recording is one
script in one slot; and the index is spread over ``shards`` slots instead of
the book's single ``known:`` key. See docs/counters.md for why memory stays
bounded without any cleaner.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import TypeVar

from webtier._core import checks
from webtier._core.checks import MAX_INT, check_integer, check_limit
from webtier._core.keys import check_name, check_names, shard_of
from webtier._core.protocol import (
    Arg,
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
from webtier.config import Config, CounterSettings
from webtier.errors import InvalidInput, WebtierError
from webtier.types import CounterCleanReport

RECORD = Script.load(__package__, "counter_record")
CLEAN = Script.load(__package__, "counter_clean")

# Counts are integers. Keeping them within 2**53 keeps every sum exact in Lua
# (whose numbers are doubles) and in JavaScript charts, and makes the 64-bit
# overflow of HINCRBY, which would leave a half-applied script, unreachable.
MAX_COUNT = MAX_INT
# Timestamps: seconds since the epoch, from 1970 to the year 2514.
MAX_TIME = checks.MAX_TIME

Sample = tuple[int, int]
Entry = tuple[str, int, float]  # name, count, time
X = TypeVar("X")


# -- argument checks ------------------------------------------------------------------


def check_count(count: object) -> int:
    """An integer count within +/-2**53; whole floats, Fractions and
    Decimals are accepted (``2.0``), others refused."""
    return check_integer("count", count, -MAX_COUNT, MAX_COUNT)


def check_time(now: object, field: str = "now") -> float:
    return checks.check_time(field, now)


def _precision_index(settings: CounterSettings, precision: object) -> int:
    seconds = check_integer("precision", precision, 1)
    for index, p in enumerate(settings.precisions):
        if p.seconds == seconds:
            return index
    known = ", ".join(str(p.seconds) for p in settings.precisions)
    raise InvalidInput("precision", f"is not a configured precision ({known})", precision)


# -- recording ------------------------------------------------------------------------


def _record_request(cfg: Config, entries: Sequence[Entry]) -> Request:
    """One script call adding every entry (all in the same shard)."""
    settings = cfg.counters
    seconds, shards, counter_keys = settings.seconds, settings.shards, cfg.keys.counter
    if len(entries) == 1:  # record()'s, built with no lists: it is on every hot path
        name, count, now = entries[0]
        ck = counter_keys(name, shards, seconds)
        args: tuple[Arg, ...] = (settings.script_settings, name, count, *_slices(now, seconds))
        return write(ck.route, ScriptCall(RECORD, (ck.index, *ck.samples), args), idempotent=False)
    keys: list[str] = []
    arguments: list[Arg] = [settings.script_settings]
    route = index = ""
    for name, count, now in entries:
        ck = counter_keys(name, shards, seconds)
        route, index = ck.route, ck.index
        keys += ck.samples
        arguments += [name, count, *_slices(now, seconds)]
    call = ScriptCall(RECORD, (index, *keys), tuple(arguments))
    return write(route, call, idempotent=False)


def _slices(now: float, seconds: tuple[int, ...]) -> tuple[int, ...]:
    """The start of the slice ``now`` falls in, at each precision: for a time
    >= 0 and whole seconds ``s``, ``int(now // s) * s``. The same for a whole
    second, so the last second's are kept (a hot counter records many times
    a second; a tuple, shared by every call of that second, is never changed)."""
    global _last_slices
    whole = int(now)
    last = _last_slices
    if last[0] == whole and last[1] is seconds:
        return last[2]
    found = tuple(whole - whole % s for s in seconds)
    _last_slices = (whole, seconds, found)
    return found


_last_slices: tuple[int, tuple[int, ...], tuple[int, ...]] = (-1, (), ())


def record(cfg: Config, name: str, count: int = 1, now: float | None = None) -> Op[None]:
    """Add ``count`` to counter ``name`` in the slice that ``now`` (default:
    the current time) falls in, at every precision, atomically, in one round
    trip. ``count`` may be negative; zero records nothing."""
    check_name("name", name)
    value = check_count(count)
    at = cfg.clock.wall() if now is None else check_time(now)
    if value:
        yield _record_request(cfg, ((name, value, at),))


def record_many(
    cfg: Config, entries: Iterable[Entry]
) -> Op[list[tuple[list[Entry], WebtierError | None]]]:
    """Record already-checked ``(name, count, now)`` entries: one script call
    per shard, all shards in one round trip per node.

    Returns each shard's entries with ``None`` or the error that stopped its
    call. A :class:`~webtier.errors.RedisUnavailable` that is not an
    ``OutcomeUnknown`` means those entries were not applied.
    """
    groups = by_shard(cfg, (e for e in entries if e[1]), itemgetter(0))
    if not groups:
        return []
    replies = yield Gather(tuple(_record_request(cfg, group) for group in groups))
    return [
        (group, reply if isinstance(reply, WebtierError) else None)
        for group, reply in zip(groups, replies, strict=True)
    ]


def by_shard(cfg: Config, items: Iterable[X], name_of: Callable[[X], str]) -> list[list[X]]:
    """Items grouped by the shard of their counter, in order of first appearance."""
    groups: dict[int, list[X]] = defaultdict(list)
    for item in items:
        groups[shard_of(name_of(item), cfg.counters.shards)].append(item)
    return list(groups.values())


# -- reading --------------------------------------------------------------------------


def _samples(reply: Reply, start: float | None, end: float | None) -> list[Sample]:
    samples = sorted((int(field), int(value)) for field, value in pairs(reply))
    if start is not None or end is not None:
        lo = -math.inf if start is None else start
        hi = math.inf if end is None else end
        samples = [s for s in samples if lo <= s[0] <= hi]
    return samples


def get(
    cfg: Config, name: str, precision: int, *, start: float | None = None, end: float | None = None
) -> Op[list[Sample]]:
    """Samples of counter ``name`` at ``precision`` (seconds) as
    ``(slice start, count)`` pairs, oldest first; only slices starting within
    ``[start, end]`` when either is given."""
    return (yield from get_many(cfg, [name], precision, start=start, end=end))[name]


def get_many(
    cfg: Config,
    names: Iterable[str],
    precision: int,
    *,
    start: float | None = None,
    end: float | None = None,
) -> Op[dict[str, list[Sample]]]:
    """:func:`get` for several counters at once: one round trip per node."""
    settings = cfg.counters
    at = _precision_index(settings, precision)
    wanted = list(dict.fromkeys(check_names("names", names)))
    lo = None if start is None else check_time(start, "start")
    hi = None if end is None else check_time(end, "end")
    seconds = settings.seconds
    requests = []
    groups = by_shard(cfg, wanted, str)
    for group in groups:
        keys = [cfg.keys.counter(n, settings.shards, seconds) for n in group]
        requests.append(read(keys[0].route, *(("HGETALL", k.samples[at]) for k in keys)))
    if not requests:
        return {}
    replies = yield tuple(requests)
    found: dict[str, list[Sample]] = {}
    for group, group_replies in zip(groups, replies, strict=True):
        for name, reply in zip(group, group_replies, strict=True):
            found[name] = _samples(reply, lo, hi)
    return {name: found[name] for name in wanted}


def names(cfg: Config, prefix: str | None = None) -> Op[list[str]]:
    """Names of the counters that have data, sorted; only those starting with
    ``prefix`` when it is given. Reads every shard of the index."""
    if prefix is not None and not (isinstance(prefix, str) and prefix == ""):
        check_name("prefix", prefix)
    shards = [cfg.keys.counter_shard(s) for s in range(cfg.counters.shards)]
    replies = yield tuple(read(route, ("ZRANGE", index, 0, -1)) for route, index in shards)
    found = {text(member) for (members,) in replies for member in members}
    if prefix:
        found = {n for n in found if n.startswith(prefix)}
    return sorted(found)


# -- cleaning -------------------------------------------------------------------------


def due_precisions(settings: CounterSettings, pass_number: int) -> list[bool]:
    """The book's schedule: a precision of p seconds is cleaned every
    max(p // 60, 1) passes, so a daily counter is not combed every minute."""
    return [pass_number % max(p.seconds // 60, 1) == 0 for p in settings.precisions]


def clean(
    cfg: Config, pass_number: int = 0, now: float | None = None, batch: int = 500
) -> Op[CounterCleanReport]:
    """One cleanup pass over every shard: drop slices older than each due
    precision keeps (``now - samples * seconds``), and unlist counters left
    with no data, atomically, so a counter written meanwhile stays listed.

    The index is walked with ZSCAN, which returns every name present for the
    whole pass even while other cleaners remove names (the book walks by
    position and skips counters when the index shrinks under it)."""
    started = cfg.clock.monotonic()
    check_limit("pass_number", pass_number)
    at = cfg.clock.wall() if now is None else check_time(now)
    check_limit("batch", batch, 1)
    settings = cfg.counters
    due = due_precisions(settings, pass_number)
    cutoffs: list[Arg] = [
        repr(at - p.span) if is_due else "-"
        for p, is_due in zip(settings.precisions, due, strict=True)
    ]
    seconds = settings.seconds
    cursors = {cfg.keys.counter_shard(s): b"0" for s in range(settings.shards)}
    visited = dropped = unlisted = 0
    while cursors:
        shards = list(cursors)
        scans = yield tuple(
            read(route, ("ZSCAN", index, cursors[(route, index)], "COUNT", batch))
            for route, index in shards
        )
        calls = []
        for (route, index), ((cursor, flat),) in zip(shards, scans, strict=True):
            members = [text(m) for m, _ in pairs(flat)]
            if cursor in (b"0", 0, "0"):
                del cursors[(route, index)]
            else:
                cursors[(route, index)] = cursor
            if not members:
                continue
            visited += len(members)
            keys = [
                k for m in members for k in cfg.keys.counter(m, settings.shards, seconds).samples
            ]
            call = ScriptCall(CLEAN, (index, *keys), (len(seconds), *cutoffs, *members))
            calls.append(write(route, call, idempotent=True))
        if calls:
            for ((counts),) in (yield tuple(calls)):
                dropped += int(counts[0])
                unlisted += int(counts[1])
    return CounterCleanReport(visited, dropped, unlisted, cfg.clock.monotonic() - started)
