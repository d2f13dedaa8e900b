"""The row cache (Redis in Action 2.4): database rows kept fresh in Redis.

Layout, per row source and shard ``crc32(key) % shards`` (see
:class:`webtier._core.keys.RowShard`): a schedule (``due`` zset, ``delay`` hash),
the loads in flight (``fill`` tickets, ``lease`` deadlines), failure counts,
a ticket sequence, and one string per cached row holding its JSON
(:mod:`webtier.rows.codec`). Every operation touches one shard, so one slot.

Every load of a row from the database, by a worker, a reader on a miss, or
``refresh_now``, first takes a *ticket* for the row in Redis, then queries,
then stores its copy only if the row still holds that ticket. Invalidating,
unscheduling or loading the row again takes the ticket away, so a load that
read the database before a write can never overwrite the copy of a load
that read it after (docs/rows.md walks through the interleavings).

This module has the schedule, the reads and the write path; the workers'
refresh is :mod:`webtier.rows.refresh`.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from webtier._core.checks import check_real
from webtier._core.keys import RowShard, check_list, shard_of
from webtier._core.protocol import (
    Arg,
    Call,
    Op,
    Reply,
    Request,
    ScriptCall,
    pairs,
    pause,
    read,
    text,
    write,
)
from webtier._core.scripts import Script
from webtier.config import Config, RowSettings
from webtier.errors import SourceConflict, SourceError
from webtier.rows.codec import decode, encode
from webtier.rows.source import Source, check_source
from webtier.types import RowStatus

CLAIM = Script.load(__package__, "row_claim")
STORE = Script.load(__package__, "row_store")
FILL = Script.load(__package__, "row_fill")
RELEASE = Script.load(__package__, "row_release")
SCHEDULE = Script.load(__package__, "row_schedule")
INVALIDATE = Script.load(__package__, "row_invalidate")

MAX_DELAY = 365 * 86400.0  # seconds
BOOKKEEPING_DAYS = 1  # the least a shard's bookkeeping of loads outlives its last load
# A reader waiting for another's load polls after 2 ms, then twice as long
# each time, up to 50 ms.
FIRST_PAUSE = 0.002
LONGEST_PAUSE = 0.05


# -- arguments ------------------------------------------------------------------------


def _delay_ms(delay: object) -> int:
    seconds = check_real("delay", delay, high=MAX_DELAY, what="seconds")
    if seconds <= 0:
        return 0
    return max(1, round(seconds * 1000))


def to_ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def bookkeeping_ms(settings: RowSettings) -> int:
    """How long (ms) a shard's bookkeeping of loads (``fill``, ``lease``,
    ``fail``, ``seq``) outlives the last load begun or failed in it: a day,
    or twice the longest lease or backoff if longer, so that no load loses
    its ticket within its lease and no failing row forgets its failures
    between two retries."""
    longest = max(settings.lease, settings.fill_lease, settings.retry_cap)
    return to_ms(max(BOOKKEEPING_DAYS * 86400.0, 2 * longest))


def _shard(cfg: Config, source: Source, key: str) -> RowShard:
    return cfg.keys.row_shard(source.name, shard_of(key, cfg.rows.shards))


def first_line(error: BaseException) -> str:
    # SQLAlchemy's messages go on with the SQL and its parameters; the cause
    # is chained for whoever wants them.
    return str(error).strip().split("\n", 1)[0]


def _decoded(copy: Reply) -> dict[str, Any] | None:
    # b"" is read-through's note that the row does not exist.
    return decode(copy) if copy else None


# -- requests -------------------------------------------------------------------------


def store_request(
    cfg: Config, shard: RowShard, entries: Sequence[tuple[str, str, str, str]]
) -> Request:
    """Store ``(key, ticket, mode, data)`` entries of one shard; see row_store.lua."""
    args: list[Arg] = [to_ms(cfg.rows.ttl), round(cfg.rows.missing_ttl * 1000)]
    for entry in entries:
        args += entry
    keys = (shard.due, shard.delay, shard.fill, shard.lease, shard.fail)
    call = ScriptCall(STORE, (*keys, *(shard.row(e[0]) for e in entries)), tuple(args))
    # Sent twice, the second finds its tickets gone and stores nothing.
    return write(shard.route, call, idempotent=True)


def release_request(
    cfg: Config, shard: RowShard, claims: Iterable[tuple[str, str]], backoff: bool = True
) -> Request:
    """Give claimed rows back, due again after their own backoff, or at once
    (``backoff=False``: the caller backs off as a whole, as the worker does
    when the database is down)."""
    rows = cfg.rows
    args: list[Arg] = [to_ms(rows.retry_backoff), to_ms(rows.retry_cap)] if backoff else [0, 0]
    args.append(bookkeeping_ms(rows))
    for key, ticket in claims:
        args += (key, ticket)
    call = ScriptCall(RELEASE, (shard.due, shard.fill, shard.lease, shard.fail), tuple(args))
    return write(shard.route, call, idempotent=True)  # a second send finds no ticket


def nonce() -> str:
    """Random text that ends every ticket of one claim or fill, so that no
    ticket is handed out twice, even by a replica promoted before the last
    increments of the sequence reached it."""
    return f"-{secrets.token_hex(4)}"


def _invalidate(shard: RowShard, key: str) -> Request:
    call = ScriptCall(INVALIDATE, (shard.due, shard.fill, shard.lease, shard.row(key)), (key,))
    return write(shard.route, call, idempotent=True)


def _fill(cfg: Config, shard: RowShard, key: str, mode: str) -> Request:
    keys = (shard.fill, shard.lease, shard.seq, shard.row(key))
    args = (key, to_ms(cfg.rows.fill_lease), mode, bookkeeping_ms(cfg.rows), nonce())
    call = ScriptCall(FILL, keys, args)
    # Sent again after a lost reply, it finds its own load live and waits it
    # out, or takes a newer ticket: slower, never wrong.
    return write(shard.route, call, idempotent=True)


# -- the source's origin -------------------------------------------------------------


def check_origin(cfg: Config, source: Source, *, record: bool = False) -> Op[None]:
    """Refuse ``source`` if another database's rows are cached under its
    name: checked until found recorded (then once per process and prefix).
    ``record``: a load from ``source`` found rows, about to be stored, so
    its origin is recorded if none is; a database that never gave a row (a
    typo in its path, say) holds no name."""
    if cfg.keys.prefix in check_source(source).checked_prefixes:
        return  # before the origin: making its text costs a parse and a stat
    origin = source.origin()
    if origin is None:
        return
    route, key = cfg.keys.row_origin(source.name)
    if record:
        # Sent twice, the SET finds its own value and the GET reads it again.
        reply = yield write(route, ("SET", key, origin, "NX"), ("GET", key), idempotent=True)
    else:
        reply = yield read(route, ("GET", key))
    recorded = reply[-1]
    if recorded is None:
        return
    if text(recorded) != origin:
        raise SourceConflict(
            f"row source {source.name!r} reads {origin}, but its cache holds rows of "
            f"{text(recorded)}: give this source another name (if that database moved "
            f"here, delete the key {key})"
        )
    source.checked_prefixes.add(cfg.keys.prefix)


# -- the schedule ---------------------------------------------------------------------


def schedule(cfg: Config, source: Source, row_id: object, delay: float) -> Op[bool]:
    """Refresh row ``row_id`` from ``source`` every ``delay`` seconds, starting
    now; ``delay <= 0`` unschedules it and drops its cached copy (the book's
    ``schedule_row_cache``). A row already scheduled keeps its next due time.
    Returns whether the row was newly scheduled."""
    key = check_source(source).key(row_id)
    ms = _delay_ms(delay)
    yield from check_origin(cfg, source)
    shard = _shard(cfg, source, key)
    keys = (shard.due, shard.delay, shard.fill, shard.lease, shard.fail, shard.row(key))
    (added,) = yield write(shard.route, ScriptCall(SCHEDULE, keys, (key, ms)), idempotent=True)
    return bool(added)


def unschedule(cfg: Config, source: Source, row_id: object) -> Op[None]:
    """Stop refreshing row ``row_id`` and drop its cached copy."""
    yield from schedule(cfg, source, row_id, 0)


def status(cfg: Config, source: Source) -> Op[RowStatus]:
    """Counts over every shard of ``source`` (due: by this client's clock)."""
    now = round(cfg.clock.wall() * 1000)
    name = check_source(source).name
    shards = [cfg.keys.row_shard(name, n) for n in range(cfg.rows.shards)]
    replies = yield tuple(
        read(
            s.route,
            ("ZCARD", s.due),
            ("ZCOUNT", s.due, "-inf", now),
            ("ZCARD", s.lease),
            ("ZRANGE", s.due, 0, 0, "WITHSCORES"),  # the next row due: the refresh's lag
        )
        for s in shards
    )
    scheduled, due, loading = (sum(int(reply[i]) for reply in replies) for i in range(3))
    firsts = [float(score) for reply in replies for _, score in pairs(reply[3])]
    overdue = max(0.0, (now - min(firsts)) / 1000) if firsts else 0.0
    return RowStatus(scheduled, due, loading, overdue)


# -- reading --------------------------------------------------------------------------


def get(
    cfg: Config, source: Source, row_id: object, *, load: bool = False
) -> Op[dict[str, Any] | None]:
    """The cached copy of row ``row_id``, or ``None``. With ``load=True`` a
    miss reads the row from the database and caches it; concurrent readers
    of the same missing row wait for that one load (single flight)."""
    key = check_source(source).key(row_id)
    yield from check_origin(cfg, source)
    shard = _shard(cfg, source, key)
    (copy,) = yield read(shard.route, ("GET", shard.row(key)))
    if copy is not None or not load:
        return _decoded(copy)
    return (yield from _read_through(cfg, source, shard, key))


def get_many(
    cfg: Config, source: Source, row_ids: Iterable[object], *, load: bool = False
) -> Op[dict[Any, dict[str, Any] | None]]:
    """Cached copies of several rows, by the ids given (``None`` where there
    is none): one round trip per node. With ``load=True`` the misses are
    read from the database with one query and cached (two more round trips,
    however many missed), each under the single flight :func:`get` keeps."""
    check_source(source)
    wanted = {row_id: source.key(row_id) for row_id in check_list("row_ids", row_ids)}
    yield from check_origin(cfg, source)
    groups: dict[RowShard, list[str]] = defaultdict(list)
    for key in dict.fromkeys(wanted.values()):
        groups[_shard(cfg, source, key)].append(key)
    if not groups:
        return {}
    replies = yield tuple(
        read(shard.route, ("MGET", *(shard.row(k) for k in keys))) for shard, keys in groups.items()
    )
    copies: dict[str, Reply] = {}
    for keys, (values,) in zip(groups.values(), replies, strict=True):
        copies.update(zip(keys, values, strict=True))
    found = {key: _decoded(copy) for key, copy in copies.items()}
    missed = [key for key, copy in copies.items() if copy is None]
    if load and missed:
        found.update((yield from _read_through_many(cfg, source, missed)))
    return {row_id: found[key] for row_id, key in wanted.items()}


def warm(cfg: Config, source: Source, row_ids: Iterable[object]) -> Op[int]:
    """Cache the rows of ``row_ids`` that are not cached, ahead of their
    readers (the book's ``cache_rows``, for rows about to be popular): one
    round trip to find them, then one query and two round trips for those
    missing. A row another reader is loading is left to it. Returns how
    many rows this call loaded."""
    check_source(source)
    keys = list(dict.fromkeys(source.key(row_id) for row_id in check_list("row_ids", row_ids)))
    yield from check_origin(cfg, source)
    shards = {key: _shard(cfg, source, key) for key in keys}
    replies = yield tuple(read(shards[key].route, ("EXISTS", shards[key].row(key))) for key in keys)
    missed = [key for key, (cached,) in zip(keys, replies, strict=True) if not cached]
    if not missed:
        return 0
    loaded = yield from _read_through_many(cfg, source, missed, wait=False)
    return len(loaded)


def _read_through_many(
    cfg: Config, source: Source, keys: Sequence[str], *, wait: bool = True
) -> Op[dict[str, dict[str, Any] | None]]:
    """:func:`_read_through` of several rows: one fill round trip, one query
    for the loads taken, one store round trip; a row whose load another
    reader holds is waited for as :func:`get` waits (``wait=False``: left
    out of the result)."""
    shards = {key: _shard(cfg, source, key) for key in keys}
    replies = yield tuple(_fill(cfg, shards[key], key, "miss") for key in keys)
    found: dict[str, dict[str, Any] | None] = {}
    tickets: dict[str, str] = {}
    waiting: list[str] = []
    for key, (reply,) in zip(keys, replies, strict=True):
        kind = text(reply[0])
        if kind == "hit":
            if wait:  # a warm-up wants only what it loaded itself
                found[key] = _decoded(reply[1])
        elif kind == "load":
            tickets[key] = text(reply[1])
        elif wait:
            waiting.append(key)
    if tickets:
        found.update((yield from _load_many(cfg, source, shards, tickets)))
    for key in waiting:  # rare: another reader loads it right now
        found[key] = yield from _read_through(cfg, source, shards[key], key)
    return found


def _load_many(
    cfg: Config, source: Source, shards: Mapping[str, RowShard], tickets: Mapping[str, str]
) -> Op[dict[str, dict[str, Any] | None]]:
    """Load the rows of ``tickets`` (key -> ticket) with one query and store
    them, as :func:`_load_one` does one."""
    by_shard: dict[RowShard, list[tuple[str, str]]] = defaultdict(list)
    for key, ticket in tickets.items():
        by_shard[shards[key]].append((key, ticket))
    try:
        rows = yield Call(partial(source.load, list(tickets)))
        data = {key: "" if rows.get(key) is None else encode(rows[key]) for key in tickets}
    except Exception as error:
        # Other readers may load these rows at once.
        yield tuple(release_request(cfg, shard, claims) for shard, claims in by_shard.items())
        raise SourceError(
            f"{source.name}: loading {len(tickets)} rows failed: {first_line(error)}"
        ) from error
    if any(data.values()):
        yield from check_origin(cfg, source, record=True)
    yield tuple(
        store_request(cfg, shard, [(key, ticket, "f", data[key]) for key, ticket in claims])
        for shard, claims in by_shard.items()
    )
    # A refused store (a newer load or a change meanwhile): what this load
    # read is at least as new as the call, so the caller gets it.
    return {key: decode(copy) if copy else None for key, copy in data.items()}


def _read_through(
    cfg: Config, source: Source, shard: RowShard, key: str
) -> Op[dict[str, Any] | None]:
    wait = FIRST_PAUSE
    while True:
        (reply,) = yield _fill(cfg, shard, key, "miss")
        kind = text(reply[0])
        if kind == "hit":
            return _decoded(reply[1])
        if kind == "load":
            return (yield from _load_one(cfg, source, shard, key, text(reply[1]), "f"))
        # Another reader or a worker is loading it: wait for its copy, or
        # for its lease to run out (then this reader takes the load).
        yield pause(min(wait, int(reply[1]) / 1000))
        wait = min(wait * 2, LONGEST_PAUSE)


def _load_one(
    cfg: Config, source: Source, shard: RowShard, key: str, ticket: str, mode: str
) -> Op[dict[str, Any] | None]:
    """Load one row under ``ticket`` and store it: ``mode`` "f" for a
    read-through, "n" for refresh_now (see row_store.lua)."""
    try:
        rows = yield Call(partial(source.load, [key]))
        row = rows.get(key)
        data = "" if row is None else encode(row)
    except Exception as error:
        # A reader lets others load the row at once; refresh_now, whose
        # caller said the row changed, drops the copy now known to be stale.
        yield (
            release_request(cfg, shard, [(key, ticket)]) if mode == "f" else _invalidate(shard, key)
        )
        raise SourceError(
            f"{source.name}: loading row {key!r} failed: {first_line(error)}"
        ) from error
    if data:
        yield from check_origin(cfg, source, record=True)
    yield store_request(cfg, shard, [(key, ticket, mode, data)])
    # A refused store means a newer load or a change came meanwhile; what
    # this load read is still at least as new as the call, so the caller
    # gets it.
    return decode(data) if data else None


# -- the write path -------------------------------------------------------------------


def invalidate(cfg: Config, source: Source, row_id: object) -> Op[bool]:
    """Row ``row_id`` changed in the database: drop its cached copy, fence
    off loads in flight, and make it due now if it is scheduled. Call it
    after your transaction commits. Returns whether a copy was dropped."""
    key = check_source(source).key(row_id)
    yield from check_origin(cfg, source)
    (dropped,) = yield _invalidate(_shard(cfg, source, key), key)
    return bool(dropped)


def refresh_now(cfg: Config, source: Source, row_id: object) -> Op[dict[str, Any] | None]:
    """Load row ``row_id`` from the database now and cache it, fencing off
    older loads in flight; returns the row, or ``None`` if it no longer
    exists. Readers keep the previous copy while it loads; once it returns,
    none sees a copy from before the call (if a newer load fenced this one
    off, the copy is dropped until that load stores). If the load fails the
    copy is dropped (it is stale) and :class:`~webtier.errors.SourceError`
    is raised."""
    key = check_source(source).key(row_id)
    yield from check_origin(cfg, source)
    shard = _shard(cfg, source, key)
    (reply,) = yield _fill(cfg, shard, key, "force")
    return (yield from _load_one(cfg, source, shard, key, text(reply[1]), "n"))
