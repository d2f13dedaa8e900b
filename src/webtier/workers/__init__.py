"""Maintenance workers (the book's daemons): jobs run on a schedule, with
warm and cold shutdown, one package:

- ``jobs``: each capability's round of maintenance (:data:`JOBS`);
- ``schedule``: when each job runs next and how a failing one backs off (pure);
- ``loop``: the worker loop, written once as a generator, and its two
  drivers, :class:`Worker` (blocking) and :class:`AsyncWorker` (asyncio);
- ``liveness``: a key with a TTL per worker, and the index that lists them;
- ``aio``: the ``tier.workers`` part; ``sync``: its sync twin, generated from ``aio``.

Library code never installs signal handlers; ``webtier worker`` does.
"""

from webtier.workers.jobs import JOBS, SESSIONS_CLEANED, jobs_named, warm_rows
from webtier.workers.loop import AsyncWorker, ColdStop, Worker
from webtier.workers.schedule import Job

__all__ = [
    "JOBS",
    "SESSIONS_CLEANED",
    "AsyncWorker",
    "ColdStop",
    "Job",
    "Worker",
    "jobs_named",
    "warm_rows",
]
