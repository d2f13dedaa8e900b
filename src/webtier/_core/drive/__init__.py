"""The only code that talks to Redis: executors for the actions of
:mod:`webtier._core.wire`, and the loops that drive operations through them.

An executor writes a pipeline on a connection it takes from redis-py's pool
(the sync one keeps it for a later call: see :mod:`webtier._core.redispy`)
and reads the replies itself. It never goes through ``execute_command``:
redis-py retries there after a timeout and would apply an increment twice.
Whether to send again is decided in :mod:`webtier._core.wire` alone.

Four executors (sync and asyncio, single server and Cluster) differ only in
how they find a connection; everything else is shared. The loops also carry
out an operation's :class:`~webtier._core.protocol.Call` (a database query): in
the caller's thread, or in a worker thread under asyncio.
"""

from webtier._core.drive.aio import AsyncTransport
from webtier._core.drive.shared import AsyncClient, SyncClient
from webtier._core.drive.sync import SyncTransport

__all__ = ["AsyncClient", "AsyncTransport", "SyncClient", "SyncTransport"]
