"""webtier: the Redis web tier of *Redis in Action*, for Python web apps.

Start with :func:`open` (sync) or :func:`open_async`, or wrap a redis-py client
you already have in :class:`WebTier` / :class:`AsyncWebTier`.
"""

from webtier._deadline import time_limit
from webtier._ops.row_refresh import RefreshReport
from webtier._ops.rows import RowStatus
from webtier._ops.stats import Recorded, Summary
from webtier.aio import WebTier as AsyncWebTier
from webtier.config import (
    Config,
    CounterSettings,
    Precision,
    RetryPolicy,
    RowSettings,
    StatsSettings,
)
from webtier.connect import connect, connect_async, disconnect, open, open_async
from webtier.embedded import EmbeddedRedis
from webtier.errors import (
    ConfigError,
    EmbeddedServerError,
    InvalidInput,
    OutcomeUnknown,
    PartiallyApplied,
    RedisUnavailable,
    ServerError,
    SourceError,
    WebtierError,
)
from webtier.histogram import Histogram
from webtier.recorder import AsyncRecorder, FlushReport, Recorder
from webtier.rowsource import FunctionSource, Source
from webtier.sync import WebTier
from webtier.timing import AccessTimer, AsyncAccessTimer

__all__ = [
    "AsyncRecorder",
    "AsyncWebTier",
    "Config",
    "ConfigError",
    "CounterSettings",
    "EmbeddedRedis",
    "EmbeddedServerError",
    "FlushReport",
    "FunctionSource",
    "InvalidInput",
    "OutcomeUnknown",
    "PartiallyApplied",
    "Precision",
    "Recorder",
    "RedisUnavailable",
    "RefreshReport",
    "RetryPolicy",
    "RowSettings",
    "RowStatus",
    "ServerError",
    "Source",
    "SourceError",
    "WebTier",
    "WebtierError",
    "connect",
    "connect_async",
    "disconnect",
    "open",
    "open_async",
    "time_limit",
]
__all__ += [
    "AccessTimer",
    "AsyncAccessTimer",
    "Histogram",
    "Recorded",
    "StatsSettings",
    "Summary",
]

# -- item view ranking -------------------------------------------------------------------
from webtier._ops.ranking import RescaleReport  # noqa: E402
from webtier.config import RankingSettings  # noqa: E402
from webtier.ranking import AsyncTopItems, AsyncViewAggregator, TopItems, ViewAggregator  # noqa: E402

__all__ += [
    "AsyncTopItems",
    "AsyncViewAggregator",
    "RankingSettings",
    "RescaleReport",
    "TopItems",
    "ViewAggregator",
]

# -- page cache ---------------------------------------------------------------
from webtier.config import PageCacheSettings  # noqa: E402
from webtier.pagerules import (  # noqa: E402
    CacheRoute,
    PageRequest,
    PageRules,
    RankAdmission,
    SetAdmission,
)

__all__ += [
    "CacheRoute",
    "PageCacheSettings",
    "PageRequest",
    "PageRules",
    "RankAdmission",
    "SetAdmission",
]

# -- sessions and carts ---
from webtier.config import SessionSettings  # noqa: E402
from webtier.sessions import CartChange, LoginResult, SessionInfo  # noqa: E402

__all__ += ["CartChange", "LoginResult", "SessionInfo", "SessionSettings"]
