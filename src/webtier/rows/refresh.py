"""The workers' side of the row cache: refresh due rows in rounds.

A round claims up to ``batch`` due rows from every shard of every source
(one script per shard, one pipeline per node), loads them ``batch`` at a
time with one query each, and stores each shard's copies with one script,
each only if its ticket still holds (see :mod:`webtier.rows.ops`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from webtier._core.keys import RowShard, check_list
from webtier._core.protocol import Arg, Call, Gather, Op, ScriptCall, text, write
from webtier.config import Config
from webtier.errors import InvalidInput, SourceError, WebtierError
from webtier.rows.codec import encode
from webtier.rows.ops import (
    CLAIM,
    bookkeeping_ms,
    check_origin,
    first_line,
    nonce,
    release_request,
    store_request,
    to_ms,
)
from webtier.rows.source import Row, Source, check_source
from webtier.types import RefreshReport


@dataclass(frozen=True, slots=True)
class Round:
    """One round of a worker: claim from every shard, load, store."""

    report: RefreshReport
    now: int | None  # server time of the claims (ms)
    more: bool  # some shard had more due rows than one round takes
    next_due: int | None  # earliest due time left in the schedule (server ms)
    # Rows that could not be cached (a value JSON cannot hold): each is
    # retried with a backoff of its own, so they do not hold up the others.
    problems: tuple[SourceError, ...] = ()


@dataclass(slots=True)
class _Claim:
    source: Source
    shard: RowShard
    key: str
    ticket: str


@dataclass(slots=True)
class _Tally:
    """Counts and errors of a round, while it runs."""

    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    errors: list[WebtierError] = field(default_factory=list)  # raised after the round
    problems: list[SourceError] = field(default_factory=list)  # reported in the Round

    def report(self, seconds: float) -> RefreshReport:
        return RefreshReport(**self.counts, seconds=seconds)


def _claims(
    replies: Sequence[Any], plan: Sequence[tuple[Source, RowShard]], batch: int, tally: _Tally
) -> tuple[list[_Claim], dict[RowShard, list[str]], int | None, bool, int | None]:
    """Claims, drops by shard, server time, whether a shard had more due
    rows than a round takes, and the earliest due time left."""
    claims: list[_Claim] = []
    drops: dict[RowShard, list[str]] = defaultdict(list)
    now: int | None = None
    next_due: int | None = None
    full = False
    for (source, shard), reply in zip(plan, replies, strict=True):
        if isinstance(reply, WebtierError):
            tally.errors.append(reply)
            continue
        ((server_now, head, count, *rest),) = reply
        now = int(server_now)
        if int(head) >= 0:
            next_due = int(head) if next_due is None else min(next_due, int(head))
        count = int(count)
        claims += (
            _Claim(source, shard, text(rest[3 * i]), text(rest[3 * i + 1])) for i in range(count)
        )
        drops[shard] += [text(key) for key in rest[3 * count :]]
        full = full or len(rest) - 2 * count >= batch  # claimed + dropped
    return claims, drops, now, full, next_due


def refresh_round(
    cfg: Config, sources: Sequence[Source] | None = None, upto: int | None = None
) -> Op[Round]:
    """One worker round over ``sources`` (default: the configured ones):
    claim due rows from every shard (at most ``batch`` each, and only those
    due by ``upto`` server ms if given), load them ``batch`` at a time, one
    query each, and store the copies."""
    started = cfg.clock.monotonic()
    settings = cfg.rows
    chosen = tuple(
        settings.sources
        if sources is None
        else (check_source(s) for s in check_list("sources", sources))
    )
    for source in chosen:
        yield from check_origin(cfg, source)
    plan = [(s, cfg.keys.row_shard(s.name, n)) for s in chosen for n in range(settings.shards)]
    if not plan:
        return Round(RefreshReport(), None, False, None)
    args: tuple[Arg, ...] = (
        settings.batch,
        to_ms(settings.lease),
        "" if upto is None else upto,
        bookkeeping_ms(settings),
        nonce(),
    )
    replies = yield Gather(
        tuple(
            # Not idempotent: sent twice it claims twice. A claim whose reply
            # is lost holds its rows until the lease runs out, then they are due.
            write(
                sh.route,
                ScriptCall(CLAIM, (sh.due, sh.delay, sh.fill, sh.lease, sh.fail, sh.seq), args),
                idempotent=False,
            )
            for _, sh in plan
        )
    )
    tally = _Tally()
    claims, drops, now, full, next_due = _claims(replies, plan, settings.batch, tally)
    tally.counts["claimed"] = len(claims)
    if any(drops.values()):
        # Their schedule entries went in the claim; their copies go now.
        yield tuple(
            write(shard.route, *(("DEL", shard.row(k)) for k in keys), idempotent=True)
            for shard, keys in drops.items()
            if keys
        )
        tally.counts["dropped"] = sum(len(keys) for keys in drops.values())
    by_source: dict[Source, list[_Claim]] = defaultdict(list)
    for claim in claims:
        by_source[claim.source].append(claim)
    for source, source_claims in by_source.items():
        for at in range(0, len(source_claims), settings.batch):
            yield from _refresh_chunk(cfg, source, source_claims[at : at + settings.batch], tally)
    if tally.errors:
        raise tally.errors[0]
    return Round(
        tally.report(cfg.clock.monotonic() - started), now, full, next_due, tuple(tally.problems)
    )


def _refresh_chunk(cfg: Config, source: Source, chunk: list[_Claim], tally: _Tally) -> Op[None]:
    """Load one chunk of claimed rows with one query, and store them."""
    try:
        rows: dict[str, Row] = yield Call(partial(source.load, [c.key for c in chunk]))
    except Exception as error:
        # The database is down, or the loader broken: every row of the chunk
        # is due again at once, and the round fails, so that the worker backs
        # off as a whole (and logs the outage once, not once per row).
        yield from _give_back(cfg, chunk, tally, backoff=False)
        failure = SourceError(
            f"{source.name}: loading {len(chunk)} rows failed: {first_line(error)}"
        )
        failure.__cause__ = error
        tally.errors.append(failure)
        return
    stores: dict[RowShard, list[tuple[str, str, str, str]]] = defaultdict(list)
    unstorable: list[_Claim] = []
    for claim in chunk:
        row = rows.get(claim.key)
        try:
            data = "" if row is None else encode(row)
        except InvalidInput as error:
            unstorable.append(claim)
            failure = SourceError(f"{source.name}: row {claim.key!r} cannot be cached: {error}")
            failure.__cause__ = error
            tally.problems.append(failure)
            continue
        stores[claim.shard].append((claim.key, claim.ticket, "r", data))
    if unstorable:
        yield from _give_back(cfg, unstorable, tally)
    if not stores:
        return
    if any(data for entries in stores.values() for *_, data in entries):
        yield from check_origin(cfg, source, record=True)
    replies = yield tuple(store_request(cfg, shard, entries) for shard, entries in stores.items())
    for (results,) in replies:
        for result in results:
            tally.counts[("fenced", "stored", "removed")[int(result)]] += 1


def _give_back(
    cfg: Config, claims: Sequence[_Claim], tally: _Tally, backoff: bool = True
) -> Op[None]:
    by_shard: dict[RowShard, list[tuple[str, str]]] = defaultdict(list)
    for claim in claims:
        by_shard[claim.shard].append((claim.key, claim.ticket))
    yield tuple(
        release_request(cfg, shard, entries, backoff) for shard, entries in by_shard.items()
    )
    tally.counts["failed"] += len(claims)


def refresh_due(cfg: Config, sources: Sequence[Source] | None = None) -> Op[RefreshReport]:
    """Refresh every row of ``sources`` (default: the configured ones) that
    is due now, in rounds of ``batch`` rows per shard, and report. Raises
    :class:`~webtier.errors.SourceError` at the end if some rows could not
    be loaded or cached (the others were)."""
    total = RefreshReport()
    problems: list[SourceError] = []
    upto: int | None = None
    while True:
        done = yield from refresh_round(cfg, sources, upto)
        total += done.report
        problems += done.problems
        if not done.more:
            if problems:
                raise problems[0]
            return total
        # Rows refreshed in this call may come due again within it (a short
        # delay); later rounds take only what was due when it began.
        upto = done.now if upto is None else upto
