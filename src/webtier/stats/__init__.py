"""Statistics per context, type and period, with percentiles, and the
access time of code blocks and web routes (Redis in Action 5.2.2-5.2.3),
one package:

- ``ops``: the operations (record, get, series, slowest): I/O-free
  generators; ``batch``: the batched recorder's merges;
- ``stats_record.lua``, ``stats_merge.lua`` (and ``stats_prelude.lua``,
  what both share): their scripts;
- ``histogram``: log-linear histograms, the percentiles' source;
- ``tally``: the batched recorder's in-process batches;
- ``access_time``: what the access-time timers share;
- ``aio``: the ``tier.stats`` part, :class:`AsyncStatsRecorder` and
  :class:`AsyncAccessTimer`; ``sync``: their sync twins, generated from ``aio``.

The web middlewares that time requests are :mod:`webtier.web.timing`.
"""

from webtier.stats.aio import AsyncAccessTimer, AsyncStatsRecorder
from webtier.stats.histogram import Histogram
from webtier.stats.sync import AccessTimer, StatsRecorder

__all__ = ["AccessTimer", "AsyncAccessTimer", "AsyncStatsRecorder", "Histogram", "StatsRecorder"]
