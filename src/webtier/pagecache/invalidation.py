"""Dropping cached pages: one page, every page of an item, or all of them.
Every invalidation replaces its shard's generation first, so a render in
flight cannot store a page from before it."""

from __future__ import annotations

import math
import secrets
from collections.abc import Mapping, Sequence

from webtier._core.keys import PageShard, check_name, shard_of
from webtier._core.protocol import Op, read, text, write
from webtier.config import Config
from webtier.errors import InvalidInput
from webtier.pagecache.request import PageRequest
from webtier.pagecache.rules import BOOK_RULES, PageRules, Plan

# Invalidations delete this many pages per request.
BATCH = 500


def generation_life(cfg: Config) -> int:
    """Milliseconds a generation lives. Safety needs more than the lock
    lease: a render stores only within its lease of its claim, so the fence
    of an invalidation made during a render is still there when it stores.
    The longest page life is added so that a generation outlives the pages
    stored around it; at most one key per shard, it costs nothing."""
    settings = cfg.pagecache
    longest_page = max(settings.ttl + settings.grace, settings.pass_ttl)
    return math.ceil((settings.lock_lease + longest_page) * 1000)


def _new_generation(cfg: Config, shard: PageShard) -> tuple[str, str, str, str, int]:
    """A new generation for ``shard``: a random value, never one seen before.

    A counter would come back: expired, then bumped again, it would restart
    at 1 and could meet the number a render in flight claimed with, letting
    a page rendered before the invalidation be stored after it. A random
    value expires safely: a render that claimed the old one (or none: "0")
    is fenced by the new one for its whole lease, and a generation that
    expires with nothing after it only fences renders (their page is then
    rendered again), never lets one through. Sent twice, it sets the same value."""
    return ("SET", shard.gen, secrets.token_hex(8), "PX", generation_life(cfg))


def invalidate(
    cfg: Config,
    url: str,
    headers: Mapping[str, str] | None = None,
    rules: PageRules | None = None,
) -> Op[None]:
    """Drop the cached page of a GET of ``url`` (with ``headers``, for the
    route's vary headers and cookies) under ``rules`` (default: the book's,
    :data:`~webtier.pagecache.rules.BOOK_RULES`)."""
    if rules is not None and not isinstance(rules, PageRules):
        raise InvalidInput("rules", f"must be PageRules, not {type(rules).__name__}", rules)
    plan = (rules or BOOK_RULES).plan(cfg, PageRequest.from_url(url, headers))
    if plan is None:
        raise InvalidInput("url", "is not cacheable under these rules", url)
    yield from invalidate_plan(cfg, plan)


def invalidate_plan(cfg: Config, plan: Plan) -> Op[None]:
    """Drop one page (one key: one URL with one set of vary header values)."""
    shard, digest = plan.shard, plan.digest
    commands: list[tuple[str | int | bytes, ...]] = [
        _new_generation(cfg, shard),  # fences a render of it in flight
        ("UNLINK", shard.page(digest)),
        ("ZREM", shard.pages, digest),
    ]
    if plan.item is not None:
        commands.append(("ZREM", shard.item(plan.item), digest))
    yield write(shard.route, *commands, idempotent=True)


def invalidate_item(cfg: Config, item: str) -> Op[int]:
    """Drop every cached page of ``item``; returns how many there were."""
    check_name("item", item)
    shard = cfg.keys.page_shard(shard_of(item, cfg.pagecache.shards))
    _, digests = yield write(
        shard.route,
        _new_generation(cfg, shard),
        ("ZRANGE", shard.item(item), 0, -1),
        idempotent=True,
    )
    yield from _drop(shard, [text(d) for d in digests], shard.item(item))
    return len(digests)


def invalidate_all(cfg: Config) -> Op[int]:
    """Drop every cached page (of this prefix); returns how many there were.

    Every shard's generation is replaced first, so a render in flight cannot
    store a page from before the call."""
    shards = [cfg.keys.page_shard(n) for n in range(cfg.pagecache.shards)]
    replies = yield tuple(
        write(s.route, _new_generation(cfg, s), ("ZCARD", s.pages), idempotent=True) for s in shards
    )
    dropped = 0
    for shard, (_, count) in zip(shards, replies, strict=True):
        left = int(count)  # bounded: pages stored after the new generation may keep coming
        while left > 0:
            (batch,) = yield read(shard.route, ("ZRANGE", shard.pages, 0, BATCH - 1))
            if not batch:
                break
            yield from _drop(shard, [text(d) for d in batch], None)
            left -= len(batch)
            dropped += len(batch)
    return dropped


def _drop(shard: PageShard, digests: Sequence[str], index: str | None) -> Op[None]:
    """Drop these pages, and their entries in the shard's page index and in
    ``index`` (an item's pages). Only the entries read: a page stored since
    stays listed, for the next invalidation to find."""
    for start in range(0, len(digests), BATCH):
        chunk = digests[start : start + BATCH]
        commands: list[tuple[str | bytes | int, ...]] = [
            ("UNLINK", *(shard.page(d) for d in chunk)),
            ("ZREM", shard.pages, *chunk),
        ]
        if index is not None:
            commands.append(("ZREM", index, *chunk))
        yield write(shard.route, *commands, idempotent=True)
