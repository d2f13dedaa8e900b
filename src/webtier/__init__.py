"""webtier: the Redis web tier of *Redis in Action*, for Python web apps.

Start with :func:`open` (sync) or :func:`open_async`, or wrap a redis-py client
you already have in :class:`WebTier` / :class:`AsyncWebTier`.
"""

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
]
__all__ += [
    "AccessTimer",
    "AsyncAccessTimer",
    "Histogram",
    "Recorded",
    "StatsSettings",
    "Summary",
]
