"""webtier: the Redis web tier of *Redis in Action*, for Python web apps.

Start with :func:`open` (sync) or :func:`open_async`, or wrap a redis-py client
you already have in :class:`WebTier` / :class:`AsyncWebTier`.

Every public name is importable from here; :mod:`webtier.errors` holds every
exception and :mod:`webtier.types` every value the calls return.
"""

from webtier._core.deadline import time_limit
from webtier._core.mux import MuxClient
from webtier._core.replicas import replica_reads
from webtier.aio import WebTier as AsyncWebTier
from webtier.config import (
    Config,
    CounterSettings,
    PageCacheSettings,
    Precision,
    RankingSettings,
    RetryPolicy,
    RowSettings,
    SessionSettings,
    StatsSettings,
)
from webtier.connect import connect, connect_async, disconnect, open, open_async
from webtier.counters import AsyncRecorder, Recorder
from webtier.embedded import EmbeddedRedis
from webtier.errors import (
    BadToken,
    CartLimit,
    ConfigError,
    DataTooLarge,
    EmbeddedServerError,
    InvalidInput,
    LateCookie,
    MissingExtra,
    OutcomeUnknown,
    OutOfStock,
    PartiallyApplied,
    RedisUnavailable,
    ServerError,
    SettingsMismatch,
    SourceConflict,
    SourceError,
    UnknownSession,
    UserMismatch,
    WebtierError,
)
from webtier.pagecache import CacheRoute, PageRequest, PageRules, RankAdmission, SetAdmission
from webtier.ranking import AsyncTopItems, AsyncViewAggregator, TopItems, ViewAggregator
from webtier.rows import FunctionSource, Source
from webtier.stats import (
    AccessTimer,
    AsyncAccessTimer,
    AsyncStatsRecorder,
    Histogram,
    StatsRecorder,
)
from webtier.sync import WebTier
from webtier.types import (
    CacheStatus,
    CartChange,
    CounterCleanReport,
    DeploymentSettings,
    FlushReport,
    JobStep,
    LoginResult,
    Page,
    Recorded,
    RefreshReport,
    Rendered,
    RescaleReport,
    RowStatus,
    Served,
    SessionCleanReport,
    SessionInfo,
    SessionStats,
    Summary,
)

__all__ = [
    # -- entry points
    "WebTier",
    "AsyncWebTier",
    "open",
    "open_async",
    "connect",
    "connect_async",
    "MuxClient",
    "disconnect",
    "time_limit",
    "replica_reads",
    "EmbeddedRedis",
    # -- settings
    "Config",
    "CounterSettings",
    "PageCacheSettings",
    "Precision",
    "RankingSettings",
    "RetryPolicy",
    "RowSettings",
    "SessionSettings",
    "StatsSettings",
    # -- errors (webtier.errors)
    "WebtierError",
    "InvalidInput",
    "BadToken",
    "CartLimit",
    "DataTooLarge",
    "ConfigError",
    "SettingsMismatch",
    "RedisUnavailable",
    "OutcomeUnknown",
    "PartiallyApplied",
    "ServerError",
    "EmbeddedServerError",
    "SourceError",
    "SourceConflict",
    "UnknownSession",
    "UserMismatch",
    "LateCookie",
    "MissingExtra",
    "OutOfStock",
    # -- returned values (webtier.types)
    "CacheStatus",
    "CartChange",
    "CounterCleanReport",
    "DeploymentSettings",
    "FlushReport",
    "JobStep",
    "LoginResult",
    "Page",
    "Recorded",
    "RefreshReport",
    "Rendered",
    "RescaleReport",
    "RowStatus",
    "Served",
    "SessionCleanReport",
    "SessionInfo",
    "SessionStats",
    "Summary",
    # -- page-cache rules
    "CacheRoute",
    "PageRequest",
    "PageRules",
    "RankAdmission",
    "SetAdmission",
    # -- timers, recorders, rankings in process
    "AccessTimer",
    "AsyncAccessTimer",
    "Recorder",
    "AsyncRecorder",
    "StatsRecorder",
    "AsyncStatsRecorder",
    "TopItems",
    "AsyncTopItems",
    "ViewAggregator",
    "AsyncViewAggregator",
    "Histogram",
    # -- row sources
    "Source",
    "FunctionSource",
]
