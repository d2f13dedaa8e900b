"""Which item pages may be cached: the book's rule (the item ranks in the
top N most viewed, read with the page's lookup) or a set the process keeps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from webtier._core.protocol import Reply, Request
from webtier.config import Config
from webtier.ranking.ops import decode_rank, rank_follow_up, rank_request


class Admission(Protocol):
    """Decides whether an item page may be cached. ``requests`` are read with
    the page's lookup, in its round trip; ``admits`` gets their replies,
    then those of ``follow_up(cfg, item, replies)`` if the admission defines
    it: requests sent next (none when the first replies decided)."""

    def requests(self, cfg: Config, item: str) -> tuple[Request, ...]: ...

    def admits(self, cfg: Config, item: str, replies: Sequence[Reply]) -> bool: ...


@dataclass(frozen=True, slots=True)
class RankAdmission:
    """The book's rule: the item ranks in the top ``cfg.pagecache.top``
    most viewed (its shard's ZREVRANK, read with the page's lookup; with
    several shards, and only when its place in its shard admits it, the
    other shards' counts of items ranked before it, in a second round trip)."""

    def requests(self, cfg: Config, item: str) -> tuple[Request, ...]:
        return (rank_request(cfg, item),)

    def follow_up(self, cfg: Config, item: str, replies: Sequence[Reply]) -> tuple[Request, ...]:
        first = replies[0]
        # The place in its shard is a lower bound of the place in the ranking.
        if first[0] is None or int(first[0]) >= cfg.pagecache.top:
            return ()
        return rank_follow_up(cfg, item, first)

    def admits(self, cfg: Config, item: str, replies: Sequence[Reply]) -> bool:
        place = decode_rank(replies[0], replies[1:])
        return place is not None and place < cfg.pagecache.top


@dataclass(frozen=True, slots=True)
class SetAdmission:
    """Admission by a set the process keeps itself (for instance a top-N set
    refreshed every few seconds): nothing is read from Redis."""

    contains: Callable[[str], bool]

    def requests(self, cfg: Config, item: str) -> tuple[Request, ...]:
        return ()

    def admits(self, cfg: Config, item: str, replies: Sequence[Reply]) -> bool:
        return self.contains(item)
