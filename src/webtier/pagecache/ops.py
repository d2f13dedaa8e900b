"""The page cache (Redis in Action 2.3): whole responses kept in Redis.

Layout, per shard (:class:`webtier._core.keys.PageShard`): one string per page
(its copy, gzip-compressed when that pays), a render lock per page being
rendered, a generation that every invalidation replaces (a random value), an
index of the shard's pages and, per item, the set of its pages; index and
sets hold each page's expiry, so they drop dead entries themselves. Every
key expires by itself.

:func:`serve` answers one request: a lookup (one GET); on a miss, the
admission read goes with the claim, and one render across all processes
(``SET NX PX``: a lock with a lease, so a holder that dies frees it), the
others wait briefly for it or get the stale copy during the grace window; the
render is stored only if the holder still holds the lock and no invalidation
happened meanwhile (the generation). A response that cannot be stored leaves
a short "pass" note so that requests stop queueing behind its renders.

This module serves; the stored copies are :mod:`webtier.pagecache.copies`,
invalidation :mod:`webtier.pagecache.invalidation`.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable, Sequence
from typing import TypeVar

from webtier._core.protocol import (
    Call,
    Gather,
    Op,
    Reply,
    Request,
    ScriptCall,
    pause,
    read,
    text,
    together,
    write,
)
from webtier._core.scripts import Script
from webtier.config import Config
from webtier.errors import InvalidInput
from webtier.pagecache.copies import PASS_NOTE, decode, encode, make_page
from webtier.pagecache.rules import Plan
from webtier.types import Page, Rendered, Served

CLAIM = Script.load(__package__, "pagecache_claim")
STORE = Script.load(__package__, "pagecache_store")
RELEASE = Script.load(__package__, "pagecache_release")
T = TypeVar("T")

# Jitter from a generator of its own: the application's random state is its own.
_JITTER = random.Random()


# A request waiting for another's render looks again after 2 ms, then twice
# as long each time, up to 50 ms.
FIRST_PAUSE = 0.002
LONGEST_PAUSE = 0.05


def serve(cfg: Config, plan: Plan, render: Call) -> Op[Served]:
    """Answer a request the rules found cacheable: from the cache, or by
    ``render`` (a :class:`Call` returning a :class:`Rendered`), storing it.

    A hit is one round trip: the ``GET``, with an item page's admission
    reads (its rank) beside it. A miss of a page not admitted renders at
    once, taking no lock; a miss of an admitted one claims it next."""
    if not isinstance(plan, Plan):
        raise InvalidInput("plan", f"must be a Plan, not {type(plan).__name__}", plan)
    if not isinstance(render, Call):
        raise InvalidInput("render", f"must be a Call, not {type(render).__name__}", render)
    copy, admission = yield from lookup(cfg, plan)
    return (yield from answer(cfg, plan, render, copy, admission=admission))


def serve_beside(
    cfg: Config,
    plan: Plan,
    render: Call,
    other: Op[T],
    rendered_for: Callable[[T], bool] | None = None,
) -> Op[tuple[Served, T]]:
    """:func:`serve`, with the first round trip of ``other`` (the visitor's
    session, for a page's holes) joined to the lookup's: a hit is still one
    round trip. Returns what each returned. ``rendered_for(result)`` true:
    the page is rendered, whatever the cache holds, and not stored (a
    visitor whose session holds what only a render shows)."""
    (copy, admission), result = yield from together(lookup(cfg, plan), other)
    if rendered_for is not None and rendered_for(result):
        return Served("MISS", rendered=(yield render)), result
    served = yield from answer(cfg, plan, render, copy, admission=admission)
    return served, result


def lookup(cfg: Config, plan: Plan) -> Op[tuple[bytes | None, list[Reply] | None]]:
    """The stored copy of the page (or pass note), if any, by a ``GET``; and
    an item page's first admission replies, read in the same round trip
    (``None`` when it has none to read). Most item pages
    of a large catalog are never admitted: with their rank at hand a miss
    renders at once, where a claim then a release would cost two more round
    trips; a hit pays one more command, never one more round trip."""
    get = read(plan.shard.route, ("GET", plan.shard.page(plan.digest)))
    extra = _admission_requests(cfg, plan)
    if not extra:
        (copy,) = yield get
        return copy, None
    replies = yield (get, *extra)
    return replies[0][0], list(replies[1:])


def answer(
    cfg: Config,
    plan: Plan,
    render: Call,
    copy: bytes | None,
    *,
    admission: Sequence[Reply] | None = None,
) -> Op[Served]:
    """:func:`serve` after its lookup found ``copy`` (and, from
    :func:`lookup`, the ``admission`` replies)."""
    if not plan.storable:
        return (yield from _unstored(cfg, render, copy))
    if copy is None:
        return (yield from _single_flight(cfg, plan, render, admission))
    page = decode(copy)
    if page is None:  # a pass note: not storable, render without waiting
        return Served("MISS", rendered=(yield render))
    if page.fresh(cfg.clock.wall()):
        return Served("HIT", page)
    return (yield from _revalidate(cfg, plan, render, page, admission))


def _unstored(cfg: Config, render: Call, copy: bytes | None) -> Op[Served]:
    """A request with inputs its key lacks: answered from the cache (fresh
    or stale), else by a render of its own that is never stored. It takes
    no lock and leaves no pass note: it cannot hold up other requests."""
    page = None if copy is None else decode(copy)
    if page is None:
        return Served("MISS", rendered=(yield render))
    return Served("HIT" if page.fresh(cfg.clock.wall()) else "STALE", page)


def _claim(cfg: Config, plan: Plan, mode: str, token: str) -> Request:
    shard, digest = plan.shard, plan.digest
    keys = (shard.page(digest), shard.lock(digest), shard.gen)
    lease = round(cfg.pagecache.lock_lease * 1000)
    # Sent again after a lost reply it finds its own lock and waits: slower, never wrong.
    return write(shard.route, ScriptCall(CLAIM, keys, (mode, token, lease)), idempotent=True)


def _admission_requests(cfg: Config, plan: Plan) -> tuple[Request, ...]:
    if plan.item is None or plan.admission is None or not plan.storable:
        return ()
    return tuple(plan.admission.requests(cfg, plan.item))


def _admits(cfg: Config, plan: Plan, answers: Sequence[Reply]) -> Op[bool]:
    """Whether the admission admits the page, given its first replies."""
    item, admission, answers = plan.item or "", plan.admission, list(answers)
    if admission is None:
        return True
    follow_up = getattr(admission, "follow_up", None)
    more = follow_up(cfg, item, answers) if follow_up is not None else ()
    if more:  # what the first replies left open (the other ranking shards)
        answers += yield more
    return admission.admits(cfg, item, answers)


def _admitted_claim(cfg: Config, plan: Plan, mode: str, token: str) -> Op[tuple[Reply, bool]]:
    """The claim's reply, and whether the page may be cached at all: the
    admission reads go with the claim (on Cluster, to their own slots at
    the same time)."""
    claim = _claim(cfg, plan, mode, token)
    if plan.item is None or plan.admission is None:
        (reply,) = yield claim
        return reply, True
    extra = plan.admission.requests(cfg, plan.item)
    if not extra:
        (reply,) = yield claim
        return reply, plan.admission.admits(cfg, plan.item, [])
    replies = yield (claim, *extra)
    return replies[0][0], (yield from _admits(cfg, plan, replies[1:]))


def _not_admitted(plan: Plan, render: Call, reply: Reply, token: str) -> Op[Served]:
    if text(reply[0]) == "render":
        yield _release(plan, token)
    return Served("MISS", rendered=(yield render))


def _claim_known(
    cfg: Config, plan: Plan, mode: str, token: str, admission: Sequence[Reply] | None
) -> Op[tuple[Reply | None, bool]]:
    """:func:`_admitted_claim`, or with the admission replies read by the
    lookup: no claim (``None``) for a page not admitted, else the claim alone."""
    if admission is None:
        return (yield from _admitted_claim(cfg, plan, mode, token))
    if not (yield from _admits(cfg, plan, admission)):
        return None, False
    (reply,) = yield _claim(cfg, plan, mode, token)
    return reply, True


def _revalidate(
    cfg: Config, plan: Plan, render: Call, stale: Page, admission: Sequence[Reply] | None
) -> Op[Served]:
    token = secrets.token_hex(8)
    reply, admitted = yield from _claim_known(cfg, plan, "stale", token, admission)
    if reply is None:  # not admitted, nothing claimed: render, and let the copy expire
        return Served("MISS", rendered=(yield render))
    if not admitted:  # no longer popular: render, and let the copy expire
        return (yield from _not_admitted(plan, render, reply, token))
    if text(reply[0]) == "render":
        return (yield from _render_and_store(cfg, plan, render, token, text(reply[1])))
    return Served("STALE", stale)  # another worker is rendering it


def _single_flight(
    cfg: Config, plan: Plan, render: Call, admission: Sequence[Reply] | None
) -> Op[Served]:
    token = secrets.token_hex(8)
    deadline = cfg.clock.monotonic() + cfg.pagecache.lock_wait
    wait = FIRST_PAUSE
    claimed, admitted = yield from _claim_known(cfg, plan, "miss", token, admission)
    if claimed is None:  # not admitted, nothing claimed: no one waits for this render
        return Served("MISS", rendered=(yield render))
    reply: Reply = claimed
    while True:
        kind = text(reply[0])
        if kind == "hit":
            page = decode(reply[1])
            if page is None:  # not storable: render without the cache
                return Served("MISS", rendered=(yield render))
            return Served("HIT" if page.fresh(cfg.clock.wall()) else "STALE", page)
        if not admitted:
            return (yield from _not_admitted(plan, render, reply, token))
        if kind == "render":
            return (yield from _render_and_store(cfg, plan, render, token, text(reply[1])))
        if cfg.clock.monotonic() >= deadline:
            return Served("MISS", rendered=(yield render))
        yield pause(min(wait, max(deadline - cfg.clock.monotonic(), 0.0)))
        wait = min(wait * 2, LONGEST_PAUSE)
        (reply,) = yield _claim(cfg, plan, "miss", token)


def _store(
    cfg: Config, plan: Plan, token: str, generation: str, copy: bytes, life: float
) -> Request:
    shard, digest = plan.shard, plan.digest
    item = shard.item(plan.item) if plan.item is not None else shard.pages
    keys = (shard.page(digest), shard.lock(digest), shard.gen, shard.pages, item)
    args = (
        token,
        generation,
        copy,
        max(1, round(life * 1000)),
        cfg.pagecache.max_pages_per_item,
        digest,
        "0" if plan.item is None else "1",
    )
    # Sent twice, the second finds the lock released and stores nothing.
    return write(shard.route, ScriptCall(STORE, keys, args), idempotent=True)


def _release(plan: Plan, token: str) -> Gather:
    shard, digest = plan.shard, plan.digest
    call = ScriptCall(RELEASE, (shard.lock(digest),), (token,))
    return Gather((write(shard.route, call, idempotent=True),))


def _render_and_store(
    cfg: Config, plan: Plan, render: Call, token: str, generation: str
) -> Op[Served]:
    try:
        rendered: Rendered = yield render
    except BaseException:
        yield _release(plan, token)  # a failure is reported, never raised over the app's
        raise
    settings = cfg.pagecache
    if rendered.ttl is None or rendered.sent or len(rendered.body) > settings.max_body:
        if rendered.status >= 500 or rendered.personal:
            # May pass, or is one visitor's (another's render may be stored):
            # the next request tries again.
            yield _release(plan, token)
        else:
            yield _store(cfg, plan, token, generation, PASS_NOTE, settings.pass_ttl)
        return Served("MISS", rendered=rendered)
    now = cfg.clock.wall()
    fresh = min(rendered.ttl, plan.ttl) * (1 - _JITTER.uniform(0, settings.jitter))
    page = make_page(cfg, rendered, fresh, now)
    yield _store(cfg, plan, token, generation, encode(page), fresh + settings.grace)
    return Served("MISS", page)
