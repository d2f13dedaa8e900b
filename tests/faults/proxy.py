"""A TCP proxy between a client and a real redis-server, run in the test's
own event loop, that mangles the server's replies: one byte per read, held
back until released, or stalled for good after some bytes. What the client
sends goes through untouched."""

from __future__ import annotations

import asyncio
import contextlib


class Proxy:
    """``split``: every byte of a reply is written alone, and the loop turns
    twice before the next, so the client reads it alone. ``flowing``:
    cleared, replies are held (and resume when set). ``stall_after``: the
    first connection forwards that many bytes of replies, then none.
    :meth:`cut_after`: the connection forwards that many more bytes of
    commands to the server, then none (to strike a batch in its middle)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.split = False
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.stall_after: int | None = None
        self.connections = 0
        self.upstream: tuple[str, int] | None = None  # the last connection's address at the server
        self.down_bytes = 0  # bytes of replies forwarded so far
        self._up_left: dict[int, int] = {}  # connection -> bytes of commands it still forwards
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        stall = self.stall_after if self.connections == 1 else None
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:  # the server is down: so is the connection through the proxy
            down_w.close()
            return
        self.upstream = up_w.get_extra_info("sockname")[:2]
        self._writers += [down_w, up_w]
        index = self.connections
        for pump in (self._up(down_r, up_w, index), self._down(up_r, down_w, stall)):
            task = asyncio.create_task(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _up(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, index: int
    ) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                left = self._up_left.get(index)
                if left is not None:
                    data = data[:left]
                    self._up_left[index] = left - len(data)
                writer.write(data)
                await writer.drain()
                if self._up_left.get(index) == 0:
                    await asyncio.Event().wait()  # cut: until the test closes the proxy
        writer.close()

    def cut_after(self, size: int) -> None:
        """The latest connection forwards ``size`` more bytes of commands, then none."""
        self._up_left[self.connections] = size

    async def _down(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stall: int | None
    ) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                if stall is not None:
                    data, stall = data[:stall], stall - min(stall, len(data))
                await self.flowing.wait()
                chunks = [data[i : i + 1] for i in range(len(data))] if self.split else [data]
                for chunk in chunks:
                    self.down_bytes += len(chunk)
                    writer.write(chunk)
                    await writer.drain()
                    if self.split:
                        await asyncio.sleep(0)
                        await asyncio.sleep(0)
                if stall == 0:
                    await asyncio.Event().wait()  # stalled: until the test closes the proxy
        writer.close()

    async def close(self) -> None:
        self.flowing.set()
        for task in list(self._tasks):
            task.cancel()
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        await asyncio.gather(*self._tasks, return_exceptions=True)
