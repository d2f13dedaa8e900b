"""webtier's own asyncio transport: one auto-pipelined connection per Redis
node (see docs/transport.md).

``link``: one connection (framing with hiredis, the FIFO of waiters,
coalesced writes, back-pressure, failure); ``dial``: opening and greeting
one; ``node``: the connections to one server; ``slots``: a cluster's slot
map; ``client``: :class:`MuxClient`, the public client; ``executor``: the
wire's actions carried out on it (:class:`MuxTransport`).
"""

from webtier._core.mux.client import MuxClient
from webtier._core.mux.executor import AnyAsyncClient, MuxTransport, async_transport

__all__ = ["AnyAsyncClient", "MuxClient", "MuxTransport", "async_transport"]
