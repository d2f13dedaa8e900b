"""The actions an executor carries out for :mod:`webtier._core.wire`, and
what it reports back: plain values, so the planning stays free of I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from redis import exceptions as rx

from webtier._core.protocol import Command, Reply


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Send:
    """Write ``commands`` as one pipeline to the node of ``target`` (a route,
    a node handle from :class:`Locate`, or an :class:`Address`), read every
    reply. Answered with an :class:`Outcome`."""

    target: Any
    commands: tuple[Command, ...]


@dataclass(frozen=True, slots=True)
class Batch:
    """Several sends to different nodes; answered with a list of outcomes in
    order. Executors may run them concurrently."""

    sends: tuple[Send, ...]


@dataclass(frozen=True, slots=True)
class Locate:
    """Find the node of each route; answered with one ``(node key, node
    handle)`` per route, or an exception where no node is known."""

    routes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Refresh:
    """Reload the cluster's slot map (nothing to do on a single server)."""


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


Action: TypeAlias = Send | Batch | Locate | Refresh | Sleep


@dataclass(slots=True)
class Outcome:
    """What came back from one :class:`Send`.

    ``replies`` holds the replies read, in order, error replies as exception
    objects. If ``error`` is set, the exchange broke before the rest were read;
    ``delivered`` then says whether anything may have reached the server.
    """

    replies: list[Reply]
    error: BaseException | None = None
    delivered: bool = True


class TimeLimitReached(rx.TimeoutError):
    """What an executor reports for a send that the operation's time limit
    cut short (or left no time to begin): the exchange gives up at once."""
