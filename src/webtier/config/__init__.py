"""Settings, as frozen values checked when they are built.

Nothing here reads the environment: the CLI and the web adapters do that at the
edge and pass plain values in. Durations are in seconds unless a name says
otherwise. The settings of each capability live in ``data`` (counters,
retries, rows, statistics, ranking) and ``web`` (page cache, sessions); every
name is importable from ``webtier.config``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from webtier._core.keys import Keyspace
from webtier.config.data import (
    ACCESS_TIME,
    BOOK_PRECISIONS,
    BOOK_SAMPLES,
    CLUSTER_RANKING_SHARDS,
    CounterSettings,
    Precision,
    RankingSettings,
    RetryPolicy,
    RowSettings,
    StatsSettings,
)
from webtier.config.web import (
    ANALYTICS_COOKIES,
    BROWSER_HEADERS,
    PROXY_HEADERS,
    SESSION_COOKIES,
    TRACKING_PARAMS,
    PageCacheSettings,
    SessionSettings,
    valid_header_names,
)

__all__ = [
    "ACCESS_TIME",
    "ANALYTICS_COOKIES",
    "BOOK_PRECISIONS",
    "BOOK_SAMPLES",
    "BROWSER_HEADERS",
    "CLUSTER_RANKING_SHARDS",
    "PROXY_HEADERS",
    "SESSION_COOKIES",
    "TRACKING_PARAMS",
    "Clock",
    "Config",
    "CounterSettings",
    "PageCacheSettings",
    "Precision",
    "RankingSettings",
    "RetryPolicy",
    "RowSettings",
    "SessionSettings",
    "StatsSettings",
    "valid_header_names",
]


@dataclass(frozen=True, slots=True)
class Clock:
    """Where operations read the time: passed in with the config, so tests
    (and a process whose clock is known to be off) choose it, and operations
    read no global. ``wall`` is seconds since the epoch; ``monotonic`` only
    measures durations."""

    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic


@dataclass(frozen=True, slots=True)
class Config:
    """Everything a :class:`~webtier.sync.WebTier` needs besides its client."""

    prefix: str = "webtier"  # every key webtier writes starts with it
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    counters: CounterSettings = field(default_factory=CounterSettings)
    rows: RowSettings = field(default_factory=RowSettings)
    stats: StatsSettings = field(default_factory=StatsSettings)
    ranking: RankingSettings = field(default_factory=RankingSettings)
    pagecache: PageCacheSettings = field(default_factory=PageCacheSettings)
    # -- sessions and carts ---
    sessions: SessionSettings = field(default_factory=SessionSettings)
    clock: Clock = field(default_factory=Clock, repr=False)
    keys: Keyspace = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", Keyspace(self.prefix))

    def for_client(self, *, cluster: bool) -> Config:
        """This config with the settings left to the client decided: the
        ranking's ``shards`` (None: 1 on a single server, 12 on Cluster).
        A tier does it when it is built, so ``tier.config`` never has None."""
        if self.ranking.shards is not None:
            return self
        shards = CLUSTER_RANKING_SHARDS if cluster else 1
        return dataclasses.replace(self, ranking=dataclasses.replace(self.ranking, shards=shards))
