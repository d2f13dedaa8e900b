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
"""

from __future__ import annotations

import json
import math
import random
import secrets
import struct
import zlib
from collections.abc import Mapping, Sequence

from webtier._core.keys import PageShard, check_name, shard_of
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
    write,
)
from webtier._core.scripts import Script
from webtier.config import Config
from webtier.errors import InvalidInput
from webtier.pagerules import BOOK_RULES, PageRequest, PageRules, Plan
from webtier.types import Page, Rendered, Served

CLAIM = Script.load("webtier._core.lua", "pagecache_claim")
STORE = Script.load("webtier._core.lua", "pagecache_store")
RELEASE = Script.load("webtier._core.lua", "pagecache_release")
# Jitter from a generator of its own: the application's random state is its own.
_JITTER = random.Random()


# A request waiting for another's render looks again after 2 ms, then twice
# as long each time, up to 50 ms.
FIRST_PAUSE = 0.002
LONGEST_PAUSE = 0.05
# Invalidations delete this many pages per request.
BATCH = 500

_MAGIC = b"WPC1"
_PASS = b"WPASS"  # "rendered, but not storable": render without waiting
_HEADER = struct.Struct(">I")
# Never stored with a page: they describe one connection or one answer.
_NOT_STORED = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "date", "age", "x-cache"}
)


# -- copies ---------------------------------------------------------------------------------


def make_page(cfg: Config, rendered: Rendered, ttl: float, now: float) -> Page:
    """The copy to store of ``rendered``: compressed when that saves a tenth or more."""
    body = rendered.body
    headers = stored_headers(rendered.headers)
    etag = next((v for k, v in headers if k.lower() == "etag"), None)
    if etag is None:
        # Weak: the same tag names the plain and the gzip representation.
        etag = 'W/"' + zlib.crc32(body).to_bytes(4, "big").hex() + f'{len(body):x}"'
        headers = (*headers, ("etag", etag))
    gzipped = False
    encoded = any(k.lower() == "content-encoding" for k, _ in headers)
    if not encoded and len(body) >= cfg.pagecache.compress_min:
        packer = zlib.compressobj(6, zlib.DEFLATED, 31)
        packed = packer.compress(body) + packer.flush()
        if len(packed) <= len(body) * 0.9:
            body, gzipped = packed, True
    return Page(rendered.status, headers, body, gzipped, etag, now, now + ttl)


def stored_headers(headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    return tuple((k.lower(), v) for k, v in headers if k.lower() not in _NOT_STORED)


def encode(page: Page) -> bytes:
    meta = json.dumps(
        {
            "s": page.status,
            "h": page.headers,
            "z": page.gzipped,
            "e": page.etag,
            "t": page.stored,
            "f": page.fresh_until,
        },
        separators=(",", ":"),
    ).encode()
    return b"".join((_MAGIC, _HEADER.pack(len(meta)), meta, page.body))


def decode(copy: bytes) -> Page | None:
    """The page of a stored copy; None for a pass note or an unknown format."""
    if not copy.startswith(_MAGIC):
        return None
    start = len(_MAGIC) + _HEADER.size
    (length,) = _HEADER.unpack_from(copy, len(_MAGIC))
    meta = json.loads(copy[start : start + length])
    headers = tuple((str(k), str(v)) for k, v in meta["h"])
    body = copy[start + length :]
    return Page(meta["s"], headers, body, meta["z"], meta["e"], meta["t"], meta["f"])


# -- serving ------------------------------------------------------------------------------


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
        if rendered.status >= 500:
            yield _release(plan, token)  # may pass; the next request tries again
        else:
            yield _store(cfg, plan, token, generation, _PASS, settings.pass_ttl)
        return Served("MISS", rendered=rendered)
    now = cfg.clock.wall()
    fresh = min(rendered.ttl, plan.ttl) * (1 - _JITTER.uniform(0, settings.jitter))
    page = make_page(cfg, rendered, fresh, now)
    yield _store(cfg, plan, token, generation, encode(page), fresh + settings.grace)
    return Served("MISS", page)


# -- invalidation ---------------------------------------------------------------------------


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
    :data:`~webtier.pagerules.BOOK_RULES`)."""
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
