"""Statistics summed in process and merged into Redis in batches.

A :class:`Batch` holds what one (context, type) recorded since the last
flush: count, sum and m2 (updated exactly as ``stats_record.lua`` updates a
record, Welford's method), min, max, errors and histogram bucket counts. A
flush merges each batch into the record of the server's current period with
one call of ``stats_merge.lua`` (Chan et al.'s parallel formula for m2), all
the calls of a node in one round trip. No I/O here: the recorders in
:mod:`webtier.stats.tally` run these operations on either API.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from webtier._core.keys import shard_of
from webtier._core.protocol import Arg, Gather, Op, Request, ScriptCall, write
from webtier._core.scripts import Script
from webtier.config import Config
from webtier.errors import ServerError, WebtierError
from webtier.stats.ops import _GUESSES, period_start

MERGE = Script.load(__package__, "stats_merge", prelude="stats_prelude")


@dataclass(slots=True)
class Batch:
    """The values of one (context, type) not yet sent; not thread-safe (the
    recorder holds its lock around it)."""

    count: int = 0
    sum: float = 0.0
    m2: float = 0.0
    min: float = math.inf
    max: float = -math.inf
    errors: int = 0
    buckets: dict[str, int] = field(default_factory=dict)

    def add(self, value: float, failed: bool, bucket: str | None) -> None:
        """Add one checked value: the arithmetic of ``stats_record.lua``,
        step for step, so a batch merged into an empty record stores the
        very doubles that recording its values one by one would have."""
        if self.count:
            mean = self.sum / self.count
            self.count += 1
            self.sum += value
            self.m2 += (value - mean) * (value - self.sum / self.count)
        else:
            self.count, self.sum, self.m2 = 1, value, 0.0
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value
        if failed:
            self.errors += 1
        if bucket is not None:
            self.buckets[bucket] = self.buckets.get(bucket, 0) + 1

    def merge(self, other: Batch) -> None:
        """Add another batch of the same (context, type): a flush that did
        not reach Redis meeting the values recorded since."""
        if not other.count:
            return
        if self.count:
            n = self.count + other.count
            delta = other.sum / other.count - self.sum / self.count
            self.m2 += other.m2 + delta * delta * self.count * other.count / n
            self.count, self.sum = n, self.sum + other.sum
        else:
            self.count, self.sum, self.m2 = other.count, other.sum, other.m2
        self.min, self.max = min(self.min, other.min), max(self.max, other.max)
        self.errors += other.errors
        for bucket, count in other.buckets.items():
            self.buckets[bucket] = self.buckets.get(bucket, 0) + count


Entry = tuple[str, str, Batch]  # context, type, its batch
Results = list[tuple[list[Entry], WebtierError | None]]


def _merge_request(cfg: Config, entry: Entry, start: int) -> Request:
    context, stat_type, batch = entry
    settings = cfg.stats
    route = cfg.keys.stats_shard(shard_of(context, settings.shards))
    keys = [cfg.keys.stats(route, settings.period, start, stat_type, context)]
    args: list[Arg] = [
        settings.period, start, settings.keep, batch.count, repr(batch.sum), repr(batch.m2),
        repr(batch.min), repr(batch.max), batch.errors, "", "",
    ]  # fmt: skip
    if stat_type in settings.ranked:
        keys.append(cfg.keys.stats_contexts(route, settings.period, start, stat_type))
        args[9:11] = [context, settings.rank_limit]
    for bucket, count in batch.buckets.items():
        args += [bucket, count]
    return write(route, ScriptCall(MERGE, tuple(keys), tuple(args)), idempotent=False)


def merge_many(cfg: Config, entries: Sequence[Entry]) -> Op[Results]:
    """Merge each (context, type)'s batch into its record of the server's
    current period: one script call each, all of a node's in one round trip
    (and one more for the calls that guessed the period wrong, around its
    turn). Returns the entries with ``None`` or the error that stopped their
    call; a :class:`~webtier.errors.RedisUnavailable` that is not an
    ``OutcomeUnknown`` means they were not applied. Not idempotent: a batch
    whose reply was lost is never sent again."""
    results: Results = []
    merged: list[Entry] = []
    start = period_start(cfg.stats, cfg.clock.wall())
    pending = list(entries)
    for _ in range(_GUESSES):
        if not pending:
            break
        replies = yield Gather(tuple(_merge_request(cfg, entry, start) for entry in pending))
        stale: list[Entry] = []
        told: list[int] = []
        for entry, reply in zip(pending, replies, strict=True):
            if isinstance(reply, WebtierError):
                results.append(([entry], reply))
            elif int(reply[0][0]) == 1:
                merged.append(entry)
            else:  # not written: the server's period starts at reply[0][1]
                stale.append(entry)
                told.append(int(reply[0][1]))
        pending = stale
        if told:  # a turn during the round trip: the newest period the server named
            start = max(told)
    if pending:
        error = ServerError("the server's clock kept moving between periods; nothing was merged")
        results.append((pending, error))
    if merged:
        results.append((merged, None))
    return results
