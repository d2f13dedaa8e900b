"""What operations ask of Redis, as plain values.

An operation is a generator. It yields a :class:`Request` (or a tuple of them,
to fan out over several slots, or a :class:`Gather`) and is sent back the
replies: a list with one reply per command, or a list of such lists. It does no I/O of its
own, so the same operation serves the sync and the asyncio API and is unit
tested by feeding it replies. Replies arrive undecoded (``bytes`` for strings)
whatever the client's ``decode_responses``; error replies never reach an
operation as replies: the transport throws the
:class:`~webtier.errors.WebtierError` they end in into the operation, at the
``yield``, where it may catch it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeAlias, TypeVar

from webtier._core.scripts import Script
from webtier.errors import OutcomeUnknown, PartiallyApplied, WebtierError

Arg: TypeAlias = bytes | str | int | float
Command: TypeAlias = tuple[Arg, ...]
Reply: TypeAlias = Any  # bytes | int | None | list[Reply] (RESP2), plus dict/float/set (RESP3)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ScriptCall:
    script: Script
    keys: tuple[str, ...]
    args: tuple[Arg, ...]

    def command(self) -> Command:
        return ("EVALSHA", self.script.sha, len(self.keys), *self.keys, *self.args)


@dataclass(frozen=True, slots=True)
class Request:
    """Commands for one slot, sent as one pipeline (one round trip).

    ``route`` is any key of the request, or its ``prefix:{tag}`` part: it
    picks the cluster node. ``idempotent`` says whether sending the commands
    twice leaves the same state as sending them once; only then may a request
    whose reply was lost be sent again. ``writes`` is False for a read (see
    :func:`read`): one that reached Redis and lost its reply changed nothing.
    """

    route: str
    commands: tuple[Command | ScriptCall, ...]
    idempotent: bool
    writes: bool = True


@dataclass(frozen=True, slots=True)
class Gather:
    """Requests whose failures are reported one by one instead of raised.

    Answered with a list holding, per request, its replies or the
    :class:`~webtier.errors.WebtierError` that stopped it. A request that
    failed with :class:`~webtier.errors.RedisUnavailable` (but not its
    subclass ``OutcomeUnknown``) was provably not applied.
    """

    requests: tuple[Request, ...]


@dataclass(frozen=True, slots=True)
class Chain:
    """Requests applied in order: each is sent only once every request before
    it has succeeded (on one node they go in one pipeline, which Redis runs
    in order). For writes to several slots where a later one must never be
    applied without an earlier one (a user's session index entry before the
    session it lists). Answered like a tuple of requests; the first failure
    is raised, and the requests before it were applied.
    """

    requests: tuple[Request, ...]


@dataclass(frozen=True, slots=True)
class Call:
    """Work outside Redis that an operation waits for: a database query, a pause.

    The sync transport calls ``blocking()``; the asyncio transport awaits
    ``awaitable()`` when there is one, else runs ``blocking()`` in a worker
    thread so the event loop never blocks. The result is sent back into the
    operation; an exception is thrown into it, where it may be handled.
    """

    blocking: Callable[[], Any]
    awaitable: Callable[[], Awaitable[Any]] | None = None


def pause(seconds: float) -> Call:
    """Wait ``seconds`` without holding anything: ``time.sleep`` on the sync
    transport, ``asyncio.sleep`` on the asyncio one. The operation stays
    free of either."""
    return Call(partial(time.sleep, seconds), partial(asyncio.sleep, seconds))


Step: TypeAlias = Request | tuple[Request, ...] | Gather | Chain
Op: TypeAlias = Generator[Step | Call, Any, T]


def read(route: str, *commands: Command | ScriptCall) -> Request:
    return Request(route, commands, idempotent=True, writes=False)


def write(route: str, *commands: Command | ScriptCall, idempotent: bool) -> Request:
    return Request(route, commands, idempotent)


U = TypeVar("U")


def together(first: Op[T], second: Op[U]) -> Op[tuple[T, U]]:
    """Two operations as one: their first steps go out in one round trip
    (per node: one pipeline), then the rest of ``first``, then the rest of
    ``second``. A first step that is not plain requests (a ``Chain``, a
    ``Gather``, a ``Call``) is taken on its own, in that order.

    A failure of the joint step is raised, and neither operation goes on:
    the caller sees one operation that failed."""
    step_a, result_a, done_a = _first_step(first)
    step_b, result_b, done_b = _first_step(second)
    if not done_a and not done_b and _plain(step_a) and _plain(step_b):
        asked_a, asked_b = _requests_of(step_a), _requests_of(step_b)
        try:
            replies = yield (*asked_a, *asked_b)
        except BaseException:
            first.close()
            second.close()
            raise
        split = len(asked_a)
        reply_a = replies[0] if type(step_a) is Request else list(replies[:split])
        reply_b = replies[split] if type(step_b) is Request else list(replies[split:])
        result_a = yield from _resumed(first, reply_a)
        result_b = yield from _resumed(second, reply_b)
    else:
        if not done_a:
            result_a = yield from _resumed(first, None, step_a)
        if not done_b:
            result_b = yield from _resumed(second, None, step_b)
    return result_a, result_b


def _first_step(op: Op[T]) -> tuple[Any, Any, bool]:
    """(its first step, None, False), or (None, its result, True) if it needs no I/O."""
    try:
        return next(op), None, False
    except StopIteration as stop:
        return None, stop.value, True


def _plain(step: Any) -> bool:
    return type(step) is Request or (type(step) is tuple and bool(step))


def _requests_of(step: Any) -> tuple[Request, ...]:
    return (step,) if type(step) is Request else step


def _resumed(op: Op[T], answer: Any, pending: Any = None) -> Op[T]:
    """Drives ``op``, already started, to its end: ``answer`` is what its
    step was answered with, or ``pending`` the step still to be answered."""
    error: BaseException | None = None
    while True:
        if pending is None:
            try:
                pending = op.throw(error) if error is not None else op.send(answer)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
        try:
            answer, error = (yield pending), None
        except BaseException as raised:  # a failure of its step: its own to handle
            answer, error = None, raised
        pending = None


def all_applied(operation: str, parts: Sequence[tuple[str, Any]]) -> list[Any]:
    """The replies of a :class:`Gather`'s requests, each named as a part of
    ``operation``, when every one succeeded. Otherwise raises what happened:
    the error itself when no part applied (``OutcomeUnknown`` over plain
    ``RedisUnavailable`` when both occur), else
    :class:`~webtier.errors.PartiallyApplied` naming the parts."""
    failed = [(name, result) for name, result in parts if isinstance(result, WebtierError)]
    if not failed:
        return [result for _, result in parts]
    applied = tuple(name for name, result in parts if not isinstance(result, WebtierError))
    unknown = tuple(name for name, error in failed if isinstance(error, OutcomeUnknown))
    first = next((e for _, e in failed if isinstance(e, OutcomeUnknown)), failed[0][1])
    if not applied:
        raise first
    not_applied = tuple(name for name, error in failed if not isinstance(error, OutcomeUnknown))
    raise PartiallyApplied(operation, applied, not_applied, unknown) from first


# -- reply decoding shared by operations ----------------------------------------------
def text(reply: Reply) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def pairs(reply: Reply) -> Iterable[tuple[Reply, Reply]]:
    """Field/value pairs of a hash or WITHSCORES reply, in RESP2 or RESP3."""
    if isinstance(reply, dict):
        return reply.items()
    if reply and isinstance(reply[0], list | tuple):  # RESP3 [[member, score], ...]
        return ((item[0], item[1]) for item in reply)
    it = iter(reply)
    return zip(it, it, strict=True)
