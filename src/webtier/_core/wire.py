"""How a step of an operation reaches Redis, decided without doing any I/O.

:func:`exchange` turns a :class:`~webtier._core.protocol.Request` (or a tuple of
them) into actions for an executor (send a pipeline, locate nodes, refresh the
cluster map, sleep) and reads the outcomes. It owns every policy about
failures, so the sync and asyncio executors stay a few lines each:

* An error reply that proves the command did not run (``MOVED``, ``ASK``,
  ``NOSCRIPT``, ``TRYAGAIN``, ``CLUSTERDOWN``, ``LOADING``, ``READONLY``,
  ``NOREPLICAS``...)
  sends that command again, after loading the script, following the
  redirection, refreshing the slot map or backing off. A pipeline runs in
  order: the commands that followed a script answered ``NOSCRIPT`` ran
  without its effect, so those that may run twice (reads, idempotent
  writes) go again after it; a write that may not keeps its reply.
* An I/O failure before anything was written (connection refused, no node
  for the slot) sends again after a backoff, for every request.
* An I/O failure after the write (timeout, reset) sends again only commands
  of idempotent requests. For the others the outcome is unknown and
  :class:`~webtier.errors.OutcomeUnknown` is raised: webtier never risks
  applying an increment twice. redis-py's own retry would re-send it; webtier
  bypasses it by talking to connections directly. An idempotent write that
  runs out of tries or time after one of them reached Redis is
  ``OutcomeUnknown`` too: plain ``RedisUnavailable`` always means not applied.

This module is the hot path (one send, every reply fine) and the entry;
what a failed send leads to is :mod:`webtier._core.recovery`.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from webtier._core.actions import Action, Locate, Outcome, Send
from webtier._core.protocol import Chain, Command, Gather, Reply, Request, ScriptCall, Step
from webtier._core.recovery import recover
from webtier.config import RetryPolicy
from webtier.errors import WebtierError

# -- the exchange ---------------------------------------------------------------------


def _wire_commands(request: Request) -> tuple[Command, ...]:
    # Written for the hot path: most requests hold one command.
    commands = request.commands
    if len(commands) == 1:
        only = commands[0]
        return (only.command(),) if type(only) is ScriptCall else commands  # type: ignore[return-value]
    return tuple([c.command() if type(c) is ScriptCall else c for c in commands])  # type: ignore[misc]


def _requests(step: Step) -> tuple[Request, ...]:
    kind = type(step)
    if kind is Request:
        return (step,)  # type: ignore[return-value]
    if kind is Gather or kind is Chain:
        return step.requests  # type: ignore[union-attr]
    return step  # type: ignore[return-value]


def planned(step: Step) -> list[tuple[Command, ...]]:
    """The commands of each request of ``step``, for the hot path: everything
    sent once as one pipeline to the one node that serves it all (always so
    on a single server, where executors skip :class:`Locate`)."""
    if type(step) is Request:
        return [_wire_commands(step)]
    return [_wire_commands(r) for r in _requests(step)]


def flat(commands: list[tuple[Command, ...]]) -> tuple[Command, ...]:
    if len(commands) == 1:
        return commands[0]
    joined: tuple[Command, ...] = ()
    for each in commands:
        joined += each
    return joined


NOT_DONE: Any = object()  # what settled() returns when the exchange must go on


def settled(step: Step, outcome: Outcome, commands: list[tuple[Command, ...]]) -> Any:
    """The step's replies if the hot path's one send answered it all, else
    ``NOT_DONE``: :func:`exchange` with ``first=outcome`` recovers from there."""
    if outcome.error is not None:
        return NOT_DONE
    replies = outcome.replies
    for reply in replies:
        if isinstance(reply, BaseException):
            return NOT_DONE
    if type(step) is Request:
        return replies
    return _split(replies, commands)


def exchange(
    step: Step, policy: RetryPolicy, first: Outcome | None = None
) -> Generator[Action, Any, Any]:
    """Carry out one step; return its replies (a list, or a list of lists).

    ``first`` is the outcome of the hot path's send, when the executor made it
    itself (see :func:`planned` and :func:`settled`) and it did not settle the
    step: the exchange recovers from it."""
    requests = _requests(step)
    if not requests:
        return []
    if first is not None:
        results = yield from recover(requests, policy, first=first)
        return _finished(step, results)
    # The hot path: every request served by one node, sent once, every reply
    # fine. Anything else is recovered.
    target: Any = requests[0].route
    if len(requests) > 1:
        located = yield Locate(tuple(r.route for r in requests))
        node = _one_node(located)
        target = None if node is None else (node[1] or target)
        if target is None and type(step) is Chain:
            # Several nodes: one request after the other, each once the
            # one before it succeeded.
            chained = []
            for request in requests:
                chained.append((yield from exchange(request, policy)))  # noqa: PERF401 (a yield)
            return chained
    if target is None:
        results = yield from recover(requests, policy, first=None, located=located)
    else:
        commands = planned(step)
        outcome: Outcome = yield Send(target, flat(commands))
        done = settled(step, outcome, commands)
        if done is not NOT_DONE:
            return done
        results = yield from recover(requests, policy, first=outcome)
    return _finished(step, results)


def _finished(step: Step, results: list[Any]) -> Any:
    """What a step that needed recovery answers: a Gather its results, errors
    in place; anything else its replies, or the first error raised."""
    if type(step) is Gather:
        return results
    for result in results:
        if isinstance(result, WebtierError):
            raise result
    return results[0] if type(step) is Request else results


def _one_node(located: Sequence[Any]) -> Any:
    """The (key, handle) of the one node that serves every route, or None."""
    first = located[0]
    if isinstance(first, BaseException):
        return None
    for found in located[1:]:
        if isinstance(found, BaseException) or found[0] != first[0]:
            return None
    return first


def _split(replies: list[Reply], commands: list[tuple[Command, ...]]) -> list[Any]:
    if len(commands) == 1:
        return [replies]
    results, at = [], 0
    for each in commands:
        results.append(replies[at : at + len(each)])
        at += len(each)
    return results
