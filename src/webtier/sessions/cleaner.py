"""The session cleaner: which sessions to remove, chosen per shard from
samples, and the check-and-delete that never removes a live one."""

from __future__ import annotations

import bisect
import math

from webtier._core.protocol import (
    Arg,
    Op,
    Reply,
    Request,
    ScriptCall,
    read,
    write,
)
from webtier.config import Config, SessionSettings
from webtier.errors import (
    InvalidInput,
)
from webtier.sessions.layout import CLEAN, PICK
from webtier.types import SessionCleanReport

# -- the cleaner ----------------------------------------------------------------------------


def _check_keep(keep: object) -> int:
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise InvalidInput("keep", "must be an int >= 0", keep)
    return keep


def _scores(page: list[Reply]) -> list[int]:
    # Scores are whole µs below 2**53, which Redis writes as plain digits;
    # anything else (a score some other writer left) is read as a float.
    try:
        return [int(score) for score in page]
    except ValueError:
        return [int(float(score)) for score in page]


# A cleaner's choice: per shard, (the highest score to remove, the most to
# remove, how many of those surely were there when picked). The bound is a
# score, or "(<cutoff>" for "below the cutoff".
Choice = dict[int, tuple[Arg, int, int]]


def _stale_first(cutoffs: list[int], stale: list[int], budget: int) -> Choice:
    """Stale sessions only, in shard order, at most ``budget``: any of them
    may go, so which of them is free."""
    chosen: Choice = {}
    for shard, count in enumerate(stale):
        take = min(count, budget)
        if take:
            chosen[shard] = (f"({cutoffs[shard]}", take, take)
            budget -= take
    return chosen


def _choose_by_samples(settings: SessionSettings, picks: list[Reply], keep: int) -> Choice | None:
    """The cleaner's choice from each shard's [cutoff, sessions, stale,
    rank, score, rank, score...], or ``None`` when the samples are too
    coarse to choose well (few sessions over the limit with tied scores,
    say): then the caller reads whole pages (:func:`_choose`).

    Stale sessions go first; then, while the store is over ``keep``, the
    oldest fresh ones: every session of every shard scoring up to a
    threshold ``T``. Samples bound how many score up to ``T`` in a shard:
    at most the rank of its first sample above ``T``, at least one more than
    the rank of its last sample at or below it. ``T`` is the highest sample
    score whose upper bounds add up to no more than may go, so what goes is
    exactly the oldest of all shards, never more than allowed, and often a
    little less. Race-free as :func:`_choose`: no shard's bound is above a
    score of its own."""
    cutoffs, cards, stale, ranks, scores = [], [], [], [], []
    for cutoff, sessions, below, *samples in picks:
        cutoffs.append(int(cutoff))
        cards.append(int(sessions))
        stale.append(int(below))
        ranks.append([int(rank) for rank in samples[0::2]])
        scores.append(_scores(samples[1::2]))
    stale_total = sum(stale)
    wanted = min(settings.clean_batch, max(stale_total, sum(cards) - keep))
    if wanted <= stale_total:
        return _stale_first(cutoffs, stale, wanted)

    def bounds(threshold: float) -> tuple[list[int], list[int]]:
        most, least = [], []
        for shard, shard_scores in enumerate(scores):
            if threshold < cutoffs[shard]:
                most.append(stale[shard])
                least.append(stale[shard])
                continue
            at = bisect.bisect_right(shard_scores, threshold)
            above = ranks[shard][at] if at < len(shard_scores) else cards[shard]
            most.append(max(above, stale[shard]))
            least.append(max(ranks[shard][at - 1] + 1 if at else 0, stale[shard]))
        return most, least

    # A shard whose page is not the whole shard may hold sessions scoring up
    # to its last sample beyond the page: thresholds stop there (as in
    # _choose). Below it, every shard's last sample is at or below its
    # highest score, which bounds what the removal may take in that shard.
    horizon = min(
        (
            shard_scores[-1]
            for shard_scores, card, shard_ranks in zip(scores, cards, ranks, strict=True)
            if shard_ranks and card > shard_ranks[-1] + 1
        ),
        default=math.inf,
    )
    candidates = sorted(
        {score for shard_scores in scores for score in shard_scores if score <= horizon}
    )
    # The highest candidate that fits (the bounds grow with the threshold).
    low, high = 0, len(candidates)
    while low < high:
        middle = (low + high) // 2
        if sum(bounds(candidates[middle])[0]) <= wanted:
            low = middle + 1
        else:
            high = middle
    threshold = candidates[low - 1] if low else -math.inf
    most, least = bounds(threshold)
    if sum(least) < max(1, wanted // 2):
        return None
    chosen: Choice = {}
    for shard, count in enumerate(most):
        if count:
            # Never above a score the shard itself holds: on a Cluster each
            # shard's scores come from its own node's clock, and a session
            # touched after the pick scores above the shard's highest only.
            bound: Arg = f"({cutoffs[shard]}"
            if threshold >= cutoffs[shard]:
                bound = min(threshold, scores[shard][-1])
            chosen[shard] = (bound, count, least[shard])
    return chosen


def _choose(settings: SessionSettings, picks: list[Reply], keep: int, per_shard: int) -> Choice:
    """The cleaner's choice from each shard's whole page: [cutoff, sessions,
    stale, oldest scores...]. Every shard's choice is a run of its oldest,
    so a score and a count say it.

    Stale sessions (idle past the timeout or the backstop) go first, in shard
    order; then, while the store is over ``keep``, the oldest fresh ones of
    all shards (ties in shard order); at most ``clean_batch`` in all. Pages
    are sorted, so each shard's stale and chosen sessions are prefixes of its
    page: counted with bisection, not entry by entry (a step reads thousands)."""
    remaining = 0
    pages: list[list[int]] = []
    stale: list[int] = []  # per shard, how many of its page are stale
    # A shard whose page came back full may hold entries older than the ones
    # another shard's page shows: only entries up to the lowest end of a full
    # page are surely among the oldest of all shards, so only those are chosen.
    horizon = math.inf
    for cutoff, sessions, _, *page in picks:
        remaining += int(sessions)
        scores = _scores(page)
        pages.append(scores)
        stale.append(bisect.bisect_left(scores, int(cutoff)))
        if len(scores) == per_shard:
            horizon = min(horizon, scores[-1])
    budget = settings.clean_batch
    taken = []
    for count in stale:
        taken.append(min(count, budget))
        budget -= taken[-1]
    fresh = [
        scores[first : bisect.bisect_right(scores, horizon, lo=first)]
        for scores, first in zip(pages, stale, strict=True)
    ]
    wanted = min(max(0, remaining - sum(stale) - keep), budget)
    if wanted:
        _take_oldest(fresh, wanted, taken)
    return {
        shard: (pages[shard][count - 1], count, count) for shard, count in enumerate(taken) if count
    }


def _take_oldest(runs: list[list[int]], wanted: int, taken: list[int]) -> None:
    """Add to ``taken`` the ``wanted`` lowest scores of the sorted ``runs``
    (all of them if fewer), ties going to the lower shard."""
    merged = sorted(score for run in runs for score in run)
    if wanted >= len(merged):
        for shard, run in enumerate(runs):
            taken[shard] += len(run)
        return
    last = merged[wanted - 1]
    below = [bisect.bisect_left(run, last) for run in runs]
    ties = wanted - sum(below)
    for shard, run in enumerate(runs):
        at_last = min(bisect.bisect_right(run, last) - below[shard], ties)
        ties -= at_last
        taken[shard] += below[shard] + at_last


def _stale_age_us(settings: SessionSettings) -> int:
    return math.ceil(min(settings.idle_timeout or settings.backstop, settings.backstop) * 1e6)


def clean(
    cfg: Config, *, keep: int | None = None, max_steps: int | None = None
) -> Op[SessionCleanReport]:
    """One cleaner pass: keep the ``keep`` most recently seen sessions
    (default: the configured limit) and remove the others, and those idle
    past the idle timeout or the backstop, step by step until none is left
    to remove (or ``max_steps``). Race-free: a session touched after the cleaner read its
    shard is kept. Two round trips per step (three when sampled scores do
    not suffice). The users' indexes are hints, pruned when read
    (:func:`of_user`, :func:`login`, :func:`revoke`)."""
    settings = cfg.sessions
    keep = settings.limit if keep is None else _check_keep(keep)
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int)):
        raise InvalidInput("max_steps", "must be an int >= 1 or None", max_steps)
    started = cfg.clock.monotonic()
    per_shard = max(1, math.ceil(settings.clean_batch * 1.25 / settings.shards))
    age = _stale_age_us(settings)
    routes = [cfg.keys.session_shard(shard) for shard in range(settings.shards)]
    recents = [cfg.keys.session_recent(route) for route in routes]
    prefixes = [cfg.keys.session(route, "") for route in routes]

    def pick(mode: str) -> tuple[Request, ...]:
        return tuple(
            read(route, ScriptCall(PICK, (recent,), (age, per_shard, mode)))
            for route, recent in zip(routes, recents, strict=True)
        )

    deleted = spared = steps = remaining = 0
    more = False
    while True:
        picks = [reply for (reply,) in (yield pick("sample"))]
        remaining = sum(int(sessions) for _, sessions, *_ in picks)
        chosen = _choose_by_samples(settings, picks, keep)
        if chosen is None:  # too coarse here: read the oldest scores whole
            picks = [reply for (reply,) in (yield pick("all"))]
            remaining = sum(int(sessions) for _, sessions, *_ in picks)
            chosen = _choose(settings, picks, keep, per_shard)
        if not chosen:
            break
        shards = list(chosen)
        replies = yield tuple(
            write(
                routes[shard],
                ScriptCall(CLEAN, (recents[shard], prefixes[shard]), chosen[shard][:2]),
                idempotent=True,
            )
            for shard in shards
        )
        for shard, (removed,) in zip(shards, replies, strict=True):
            deleted += int(removed)
            # Sessions surely there when picked, not removed: touched since.
            spared += max(0, chosen[shard][2] - int(removed))
            remaining -= int(removed)
        steps += 1
        if max_steps is not None and steps >= max_steps:
            more = True
            break
    return SessionCleanReport(
        deleted, spared, remaining, steps, cfg.clock.monotonic() - started, more
    )
