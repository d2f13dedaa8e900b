"""The row cache (Redis in Action 2.4) as operations, one idea per module:

- ``core``: the schedule, the reads and the ticketed write path;
- ``refresh``: the workers' rounds that reload due rows;
- ``codec``: the JSON that holds one row in Redis.
"""

from webtier._ops.rows.core import *  # noqa: F403 (the package is the operations' namespace)
from webtier._ops.rows.core import FILL, bookkeeping_ms, nonce, store_request  # noqa: F401 (used by tests)
