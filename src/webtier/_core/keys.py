"""Every Redis key webtier uses is built here, and nowhere else.

Layout: ``<prefix>:{<tag>}:<rest>``. The hash tag is the first ``{...}`` of
every key, so Redis Cluster places by the tag alone: whatever a user-supplied
name contains (``{``, ``}``, ``:``...) it sits after the tag and cannot move a
key to another slot. Every operation touches keys of one tag only, hence of
one slot, so scripts and pipelines work unchanged on Cluster.

User names are checked before any key is built from them (:func:`check_name`):
they are non-empty text, at most ``MAX_NAME_BYTES`` of UTF-8, without control
characters. The part after the tag is chosen so that two different
(kind, name) pairs can never spell the same key.
"""

from __future__ import annotations

import binascii
import itertools
import math
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from webtier.errors import ConfigError, InvalidInput

MAX_NAME_BYTES = 1024
# C0 and C1 controls, DEL, and lone surrogates (text that is not valid UTF-8).
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
# Row source names go inside a hash tag: no braces, no colons.
_SOURCE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ConfigError(f"prefix must be 1-64 characters of A-Z a-z 0-9 _ . : - (got {prefix!r})")
    return prefix


def check_name(field: str, name: object) -> str:
    """Return ``name`` if it may be part of a key, else raise InvalidInput."""
    if not isinstance(name, str):
        raise InvalidInput(field, f"must be a str, not {type(name).__name__}", name)
    if not name:
        raise InvalidInput(field, "must not be empty", name)
    bad = _FORBIDDEN.search(name)
    if bad:
        raise InvalidInput(
            field, f"contains control character or lone surrogate {bad.group()!r}", name
        )
    # Only long names can exceed the limit; skip the encoding for the rest.
    if len(name) * 4 > MAX_NAME_BYTES and len(name.encode()) > MAX_NAME_BYTES:
        raise InvalidInput(field, f"is longer than {MAX_NAME_BYTES} bytes of UTF-8", name)
    return name


def check_list(field: str, values: object) -> list[object]:
    """The members of ``values``, an iterable of names or ids; a ``str`` (or
    bytes) is refused rather than split into its characters."""
    if isinstance(values, str | bytes | bytearray | memoryview):
        raise InvalidInput(field, "must be a list, not text (it is not split)", values)
    if not isinstance(values, Iterable):
        raise InvalidInput(field, f"must be a list, not {type(values).__name__}", values)
    return list(values)


def check_names(field: str, names: object) -> list[str]:
    """``names``, a list (or any iterable but text) of names, each checked."""
    return [check_name(field, name) for name in check_list(field, names)]


# An int of more bits has more than MAX_NAME_BYTES decimal digits (and may be
# past Python's limit on printing ints): refused before it is printed.
_MAX_ID_BITS = math.ceil(MAX_NAME_BYTES * math.log2(10))


def check_int_id(field: str, value: int) -> str:
    """The decimal text of an integer id, limited like a name (1 KB)."""
    text = str(int(value)) if value.bit_length() <= _MAX_ID_BITS else ""
    if not text or len(text) > MAX_NAME_BYTES:
        raise InvalidInput(field, f"is longer than {MAX_NAME_BYTES} characters in decimal", value)
    return text


# Stat types are identifiers chosen by the program (``AccessTime``), never ':'.
_STAT_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


def check_stat_type(stat_type: object, field: str = "type") -> str:
    """Return ``stat_type`` if it names a stat type, else raise InvalidInput."""
    if not isinstance(stat_type, str) or not _STAT_TYPE.fullmatch(stat_type):
        raise InvalidInput(
            field, "must be 1-64 of A-Z a-z 0-9 _ . - starting with a letter", stat_type
        )
    return stat_type


def shard_of(name: str, shards: int) -> int:
    """A stable shard number for a name (the same in every process and version)."""
    return zlib.crc32(name.encode()) % shards


# -- the item view ranking's shards ---------------------------------------------------

CLUSTER_SLOTS = 16384


def slot_of_tag(tag: str) -> int:
    """The Redis Cluster slot of a key whose hash tag is ``tag``: CRC16
    (XMODEM, as Redis's ``crc16.c``) of the tag's bytes, modulo 16384."""
    return binascii.crc_hqx(tag.encode(), 0) % CLUSTER_SLOTS


def ranking_tag(shard: int, shards: int) -> str:
    """The hash tag of shard ``shard`` of a ranking of ``shards`` shards.

    One shard is the book's ``v``. Of more, shard ``i`` is ``v:<i>:<j>``,
    ``j`` the smallest integer from 0 whose tag's slot falls in the ``i``-th
    of ``shards`` equal slices of the 16,384 slots
    (``i * 16384 // shards <= slot < (i + 1) * 16384 // shards``). A Cluster
    of the default slot ranges gives each master a run of whole slices, so
    the shards spread over the masters as evenly as their counts allow
    (exactly, when the masters divide the shards: 12 shards, 3 masters, 4
    each)."""
    if shards == 1:
        return "v"
    low, high = shard * CLUSTER_SLOTS // shards, (shard + 1) * CLUSTER_SLOTS // shards
    for j in itertools.count():
        tag = f"v:{shard}:{j}"
        if low <= slot_of_tag(tag) < high:
            return tag
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True, slots=True)
class RankingShard:
    """Keys of one shard of the item view ranking; one hash tag, one slot."""

    route: str
    viewed: str  # zset: item id -> its views (rescaled); halved by every rescale
    rescaled: str  # string: start of the last period this shard was rescaled in (the fence)


@lru_cache(maxsize=64)
def _ranking_shards(prefix: str, shards: int) -> tuple[RankingShard, ...]:
    found = []
    for shard in range(shards):
        route = f"{prefix}:{{{ranking_tag(shard, shards)}}}"
        found.append(RankingShard(route, f"{route}:viewed", f"{route}:rescaled"))
    return tuple(found)


def item_shard(item: str, shards: int) -> int:
    """The ranking shard that holds ``item`` (a checked name): the IEEE
    CRC-32 (zlib's, PNG's, gzip's) of its UTF-8 bytes, modulo ``shards``, the
    same in every process, version and language."""
    return 0 if shards == 1 else zlib.crc32(item.encode()) % shards


@dataclass(frozen=True, slots=True)
class CounterKeys:
    route: str  # picks the cluster slot of everything below
    index: str  # zset: counter name -> server time (ms) of its last new slice
    samples: tuple[str, ...]  # one hash per precision: slice start -> count


@dataclass(frozen=True, slots=True)
class RowShard:
    """Keys of one shard of a row source's cache; one hash tag, one slot."""

    route: str
    due: str  # zset: row key -> when its next refresh is due (server ms)
    delay: str  # hash: row key -> its refresh delay (ms)
    fill: str  # hash: row key -> ticket of the load in flight (the fence)
    lease: str  # zset: row key -> when that load's lease runs out (server ms)
    fail: str  # hash: row key -> loads failed in a row (for the backoff)
    seq: str  # string: the last ticket handed out

    def row(self, key: str) -> str:
        """The cached copy of one row (JSON); ``key`` must have passed check_name."""
        # "row:" begins no other key of the shard, so ids never collide with them.
        return f"{self.route}:row:{key}"


def check_source_name(name: object) -> str:
    if not isinstance(name, str) or not _SOURCE.fullmatch(name):
        raise ConfigError(
            f"a row source name must be 1-64 characters of A-Z a-z 0-9 _ . - (got {name!r})"
        )
    return name


@dataclass(frozen=True, slots=True)
class Keyspace:
    prefix: str = "webtier"

    def __post_init__(self) -> None:
        check_prefix(self.prefix)

    # -- counters ---------------------------------------------------------------
    def counter_shard(self, shard: int) -> tuple[str, str]:
        """(route, index key) of one shard of the known-counters index."""
        route = f"{self.prefix}:{{c:{shard}}}"
        return route, f"{route}:known"

    def counter(self, name: str, shards: int, precisions: tuple[int, ...]) -> CounterKeys:
        """Keys of one counter; ``name`` must have passed :func:`check_name`."""
        return _counter_keys(self.prefix, name, shards, precisions)

    def counter_samples(self, route: str, precision: int, name: str) -> str:
        # The precision is digits and ends at the first ':', so the key parses
        # back to exactly one (precision, name) pair and never equals ``known``.
        return f"{route}:{precision}:{name}"

    # -- row cache ------------------------------------------------------------------
    def row_shard(self, source: str, shard: int) -> RowShard:
        """Keys of shard ``shard`` of row source ``source`` (a checked name)."""
        return _row_shard(self.prefix, source, shard)

    def row_origin(self, source: str) -> tuple[str, str]:
        """(route, key) of the record of where row source ``source`` (a
        checked name) reads its rows: a string, in the slot of shard 0."""
        route = _row_shard(self.prefix, source, 0).route
        return route, f"{route}:origin"

    # -- statistics -------------------------------------------------------------------
    def stats_shard(self, shard: int) -> str:
        """Route (hash tag) of one shard of the statistics."""
        return f"{self.prefix}:{{s:{shard}}}"

    def stats(self, route: str, period: int, start: int, stat_type: str, context: str) -> str:
        """Hash of one (context, type) for the period starting at ``start``.

        ``context`` must have passed :func:`check_name` and ``stat_type``
        :func:`check_stat_type`: the digits and the type contain no ':', so
        the key parses back to exactly one (period, start, type, context)."""
        return f"{route}:{period}:{start}:{stat_type}:{context}"

    def stats_contexts(self, route: str, period: int, start: int, stat_type: str) -> str:
        """Set of the shard's contexts of one type in one period, that
        rankings read. It starts with a word where stats keys start with digits."""
        return f"{route}:ctx:{period}:{start}:{stat_type}"

    # -- item view ranking -------------------------------------------------------------------
    def ranking(self, shards: int) -> tuple[RankingShard, ...]:
        """Keys of each shard of a ranking of ``shards`` shards (built once:
        they are used on every item view); see :func:`ranking_tag`."""
        return _ranking_shards(self.prefix, shards)

    # -- page cache -------------------------------------------------------------------------
    def page_shard(self, shard: int) -> PageShard:
        """Keys of one shard of the page cache (one hash tag, one slot)."""
        return _page_shard(self.prefix, shard)

    # -- sessions and carts -------------------------------------------------------------
    def session_shard(self, shard: int) -> str:
        """Route (hash tag) of one shard of the sessions: its sessions and
        their recency index share the slot, so scripts see both at once."""
        return f"{self.prefix}:{{s:{shard}}}"

    def session_recent(self, route: str) -> str:
        """Zset of the shard's tokens by last-seen time (server microseconds)."""
        return f"{route}:recent"

    def session(self, route: str, token: str) -> str:
        """Hash of one session (user, data, viewed items, cart). ``token``
        must have passed the token check: URL-safe characters only."""
        return f"{route}:t:{token}"

    def user_sessions(self, user: str, shards: int) -> str:
        """Hash of one user's sessions, token -> "" (a listpack while small);
        ``user`` must have passed :func:`check_name`."""
        return f"{self.prefix}:{{u:{shard_of(user, shards)}}}:{user}"

    # -- the deployment's settings ------------------------------------------------------
    @property
    def deployment_settings(self) -> str:
        """String (JSON): the settings that decide where the deployment's data
        lives, stored by its first writer. Its own tag: one slot, one key."""
        return f"{self.prefix}:{{meta}}:settings"

    # -- workers ----------------------------------------------------------------------
    @property
    def workers_route(self) -> str:
        return f"{self.prefix}:{{w}}"

    def worker(self, worker_id: str) -> str:
        """Liveness key of one worker (a string with a TTL)."""
        return f"{self.workers_route}:alive:{worker_id}"

    @property
    def workers(self) -> str:
        """Zset of worker ids by their last heartbeat (server ms)."""
        return f"{self.workers_route}:all"


@lru_cache(maxsize=16384)
def _counter_keys(prefix: str, name: str, shards: int, precisions: tuple[int, ...]) -> CounterKeys:
    space = Keyspace(prefix)
    route, index = space.counter_shard(shard_of(name, shards))
    samples = tuple(space.counter_samples(route, p, name) for p in precisions)
    return CounterKeys(route, index, samples)


@lru_cache(maxsize=4096)
def _row_shard(prefix: str, source: str, shard: int) -> RowShard:
    route = f"{prefix}:{{r:{source}:{shard}}}"
    return RowShard(
        route,
        *(f"{route}:{kind}" for kind in ("due", "delay", "fill", "lease", "fail", "seq")),
    )


# -- page cache -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PageShard:
    """Keys of one shard of the page cache. Pages are named by a digest of
    their request (hex), so no request text ever reaches a key; an item's
    id (checked) appears only after the tag, in its tag set."""

    route: str
    gen: str  # string: bumped by every invalidation, fences renders in flight
    pages: str  # zset: page digest -> when its copy expires (ms), for "invalidate all"

    def page(self, digest: str) -> str:
        return f"{self.route}:page:{digest}"

    def lock(self, digest: str) -> str:
        return f"{self.route}:lock:{digest}"

    def item(self, item: str) -> str:
        """Zset: digests of the item's cached pages -> when each expires (ms);
        ``item`` must have passed :func:`check_name`."""
        return f"{self.route}:item:{item}"


@lru_cache(maxsize=16384)
def _page_shard(prefix: str, shard: int) -> PageShard:
    route = f"{prefix}:{{pc:{shard}}}"
    return PageShard(route, f"{route}:gen", f"{route}:pages")
