"""Redis round trips counted on the wire: each pipeline a redis-py
connection (sync or asyncio) or webtier's own client sends is one. Counting
commands (INFO commandstats) would not do: a round trip is a pipeline, not a
command."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis.asyncio.connection
import redis.connection

from webtier._core.mux.link import Link


class Wire:
    """Counts the pipelines redis-py connections (sync and asyncio) and
    webtier's own client send from the test's thread, where the request
    runs, while ``on``: not those of the suite's own threads (one waits for
    the Cluster to start)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.on, self.sent, self.thread = False, 0, threading.get_ident()
        sync_send = redis.connection.AbstractConnection.send_packed_command
        async_send = redis.asyncio.connection.AbstractConnection.send_packed_command

        def counted(conn: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
            self.note()
            return sync_send(conn, command, *args, **kwargs)

        async def acounted(conn: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
            self.note()
            return await async_send(conn, command, *args, **kwargs)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
        monkeypatch.setattr(
            redis.asyncio.connection.AbstractConnection, "send_packed_command", acounted
        )
        queue = Link.send

        def queued(link: Link, packed: bytes, count: int) -> Any:
            self.note()
            return queue(link, packed, count)

        monkeypatch.setattr(Link, "send", queued)

    def note(self) -> None:
        if self.on and threading.get_ident() == self.thread:
            self.sent += 1

    @contextlib.contextmanager
    def counting(self) -> Iterator[Callable[[], int]]:
        """Counts from zero in the block; yields the count so far."""
        self.on, self.sent = True, 0
        try:
            yield lambda: self.sent
        finally:
            self.on = False
