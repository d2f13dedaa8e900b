"""Time-series counters at several precisions (Redis in Action 5.2.1),
one package:

- ``ops``: the operations (record, get, names, clean): I/O-free generators;
- ``counter_record.lua``, ``counter_clean.lua``: their scripts;
- ``tally``: the batched recorder's in-process sums;
- ``aio``: the ``tier.counters`` part and :class:`AsyncRecorder`; ``sync``:
  their sync twins (:class:`Recorder`), generated from ``aio``.
"""

from webtier.counters.aio import AsyncRecorder
from webtier.counters.sync import Recorder

__all__ = ["AsyncRecorder", "Recorder"]
