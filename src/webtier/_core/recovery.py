"""Recovering a step that the one send did not settle: the failure table.

:func:`recover` files each reply as it arrives, and plans again what must
go again, until nothing is left or the retry budget runs out; a request
that cannot complete gets its error in place of its replies. What each
error reply means, and so what to do about it, is a table
(:data:`_REPLY_FIXES`); what an I/O failure allows depends on whether the
write may have reached Redis and on whether it is idempotent (see
:mod:`webtier._core.wire`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from redis import exceptions as rx

from webtier._core.actions import (
    Action,
    Address,
    Batch,
    Locate,
    Outcome,
    Refresh,
    Send,
    Sleep,
    TimeLimitReached,
)
from webtier._core.protocol import Command, Reply, Request, ScriptCall
from webtier.config import RetryPolicy
from webtier.errors import (
    OutcomeUnknown,
    RedisUnavailable,
    ServerError,
    WebtierError,
)

# -- what an error reply means --------------------------------------------------------


class _Fix(Enum):
    LOAD = "load the script on that node, then send again"
    ASK = "send once to the named node after ASKING"
    REFRESH = "reload the slot map, then send again"
    BACKOFF = "wait, then send again"
    BACKOFF_REFRESH = "wait, reload the slot map, send again"


# Order matters: MovedError is a subclass of AskError.
_REPLY_FIXES: tuple[tuple[type[BaseException], _Fix], ...] = (
    (rx.NoScriptError, _Fix.LOAD),
    (rx.MovedError, _Fix.REFRESH),
    (rx.AskError, _Fix.ASK),
    (rx.ReadOnlyError, _Fix.REFRESH),
    (rx.TryAgainError, _Fix.BACKOFF),
    (rx.ClusterDownError, _Fix.BACKOFF_REFRESH),
    (rx.MasterDownError, _Fix.BACKOFF),
    (rx.BusyLoadingError, _Fix.BACKOFF),
)
# The same, by the first word of the message, for parsers that do not map them.
_PREFIX_FIXES = {
    "NOSCRIPT": _Fix.LOAD,
    "MOVED": _Fix.REFRESH,
    "ASK": _Fix.ASK,
    "READONLY": _Fix.REFRESH,
    "TRYAGAIN": _Fix.BACKOFF,
    "CLUSTERDOWN": _Fix.BACKOFF_REFRESH,
    "MASTERDOWN": _Fix.BACKOFF,
    "LOADING": _Fix.BACKOFF,
    # min-replicas-to-write: a master that lost its replicas (cut off, or
    # about to be failed over) refuses the write; the master may have moved.
    "NOREPLICAS": _Fix.BACKOFF_REFRESH,
}
# Redirections and reloads do not use up the retry budget, but must end.
_MAX_REDIRECTS = 16


def _fix_for(error: BaseException) -> _Fix | None:
    for kind, fix in _REPLY_FIXES:
        if isinstance(error, kind):
            return fix
    return _PREFIX_FIXES.get(str(error).split(" ", 1)[0])


def _is_error(reply: Reply) -> bool:
    return isinstance(reply, BaseException)


# -- the requests on their way --------------------------------------------------------


@dataclass(slots=True)
class _Item:
    """One command of one request, on its way."""

    req: int
    pos: int
    route: str
    call: Command | ScriptCall
    idempotent: bool
    writes: bool = True  # False for a read: a read that reached Redis changed nothing
    sent: bool = False  # a try reached Redis and its reply was lost: maybe applied
    node: Any = None  # handle of the node that serves ``route``, once located
    load: bool = False  # send SCRIPT LOAD before it (the node answered NOSCRIPT)
    ask: Address | None = None  # send it to this node after ASKING

    def commands(self) -> tuple[Command, ...]:
        call = self.call
        command = call.command() if isinstance(call, ScriptCall) else call
        before: tuple[Command, ...] = ()
        if self.load and isinstance(call, ScriptCall):
            before = (("SCRIPT", "LOAD", call.script.source),)
        if self.ask is not None:
            before = (*before, ("ASKING",))
        return (*before, command)

    def target(self) -> Any:
        if self.ask is not None:
            return self.ask
        return self.route if self.node is None else self.node


def recover(
    requests: Sequence[Request],
    policy: RetryPolicy,
    first: Outcome | None,
    located: Sequence[Any] | None = None,
) -> Generator[Action, Any, list[Any]]:
    # The general case: many requests, several nodes, any mix of failures.
    # Replies are filed as they arrive; what must go again is planned again
    # until nothing is left or the budget runs out. A request that cannot
    # complete gets its error in place of its replies.
    results: list[Any] = [[None] * len(r.commands) for r in requests]
    pending = [
        _Item(i, j, r.route, c, r.idempotent, r.writes)
        for i, r in enumerate(requests)
        for j, c in enumerate(r.commands)
    ]
    failures = redirects = 0
    while pending:
        if first is not None:  # the hot path already sent everything once
            groups, outcomes, first = [pending], [first], None
        else:
            if located is not None:  # where each request went, found by the caller
                per_item = [located[item.req] for item in pending]
                groups, located = _grouped(pending, per_item), None
            else:
                groups = yield from _group(pending, single=len(requests) == 1)
            sends = tuple(
                Send(g[0].target(), tuple(c for item in g for c in item.commands())) for g in groups
            )
            outcomes = [(yield sends[0])] if len(sends) == 1 else (yield Batch(sends))
        again: list[_Item] = []
        fixes: set[_Fix] = set()
        cause: BaseException | None = None
        for group, outcome in zip(groups, outcomes, strict=True):
            cause = _settle(group, outcome, results, again, fixes) or cause
        pending = [item for item in again if not isinstance(results[item.req], WebtierError)]
        if not pending:
            break
        waits = bool(fixes & {_Fix.BACKOFF, _Fix.BACKOFF_REFRESH})
        if waits:
            failures += 1
            if failures > policy.attempts:
                _give_up(results, pending, f"no answer after {failures} tries: {cause}", cause)
                break
        else:
            redirects += 1
            if redirects > _MAX_REDIRECTS:
                why = f"gave up after {redirects} redirections: {cause}"
                _give_up(results, pending, why, cause)
                break
        if fixes & {_Fix.REFRESH, _Fix.BACKOFF_REFRESH}:
            yield Refresh()
        if waits:
            yield Sleep(policy.pause_before(failures))
        for item in pending:
            item.node = None
    return results


def _fail(
    results: list[Any], items: Sequence[_Item], error: WebtierError, cause: BaseException | None
) -> None:
    error.__cause__ = cause
    for item in items:
        if not isinstance(results[item.req], WebtierError):
            results[item.req] = error


def _settle(
    group: list[_Item],
    outcome: Outcome,
    results: list[Any],
    again: list[_Item],
    fixes: set[_Fix],
) -> BaseException | None:
    """File the replies of one send; queue what must be sent again.

    A send is one pipeline, run in order: what follows a script is meant to
    see its effect (a read of what it wrote). A script the node did not
    know (NOSCRIPT) ran not at all, so the commands after it that may run
    twice (reads, idempotent writes) go again after it, once it is loaded;
    a write that may not run twice keeps its place, and its reply."""
    replies = iter(outcome.replies)
    cause: BaseException | None = None
    reloading = False  # a script before this item goes again
    for index, item in enumerate(group):
        got = [next(replies, _UNREAD) for _ in item.commands()]
        if _UNREAD in got:  # the exchange broke before this item was answered
            return _broken(group[index:], outcome, results, again, fixes)
        *extras, reply = got
        refused = [r for r in (*extras, reply) if _is_error(r) and _fix_for(r) is None]
        if refused:  # a script that does not compile, a key of the wrong type...
            _fail(
                results, [item], ServerError(f"Redis refused a command: {refused[0]}"), refused[0]
            )
            continue
        if not _is_error(reply):
            item.load, item.ask = False, None
            if reloading and (item.idempotent or not item.writes):
                again.append(item)  # its reply came before the script ran
                continue
            if isinstance(results[item.req], list):
                results[item.req][item.pos] = reply
            continue
        fix = _fix_for(reply)
        assert fix is not None
        fixes.add(fix)
        cause = reply
        item.load = fix is _Fix.LOAD
        item.ask = Address(reply.host, int(reply.port)) if fix is _Fix.ASK else None
        reloading = reloading or item.load
        again.append(item)
    return cause


_UNREAD: Any = object()  # marks a reply that never came


def _broken(
    unread: list[_Item], outcome: Outcome, results: list[Any], again: list[_Item], fixes: set[_Fix]
) -> BaseException:
    """The send failed before ``unread`` were answered: retry them, or give up."""
    error = outcome.error
    if error is None:  # fewer replies than commands without an error: a bug
        error = ServerError(f"{len(unread)} commands went unanswered")
    if isinstance(error, rx.AuthenticationError | rx.AuthorizationError):
        _fail(results, unread, RedisUnavailable(f"Redis refused the credentials: {error}"), error)
        return error
    out_of_time = isinstance(error, TimeLimitReached)
    for item in unread:
        if outcome.delivered:
            item.sent = True
        if outcome.delivered and not item.idempotent:
            lost = OutcomeUnknown(
                f"the reply to a write was lost ({error}); it may or may not have been "
                "applied, and webtier does not send it again"
            )
            _fail(results, [item], lost, error)
        elif out_of_time:  # no try is left to make
            _give_up(results, [item], str(error), error)
        else:
            again.append(item)
    fixes.add(_Fix.BACKOFF_REFRESH)
    return error


def _give_up(
    results: list[Any], items: Sequence[_Item], why: str, cause: BaseException | None
) -> None:
    """Fail ``items``, out of tries or time. A request of idempotent writes
    one of whose tries reached Redis (its reply lost) may have been applied,
    even if the server hung or restarted after: "not applied" would be false,
    so it gets ``OutcomeUnknown`` (and is safe to repeat)."""
    maybe = {item.req for item in items if item.sent and item.writes}
    for item in items:
        if item.req in maybe:
            error: WebtierError = OutcomeUnknown(
                f"{why}; a try of this write reached Redis and its reply was lost, so it "
                "may have been applied (it is safe to repeat)"
            )
        else:
            error = RedisUnavailable(why)
        _fail(results, [item], error, cause)


def _group(pending: list[_Item], single: bool) -> Generator[Action, Any, list[list[_Item]]]:
    """Split pending items by the node that serves them; ASK targets apart."""
    if single and all(item.ask is None for item in pending):
        return [pending]
    routed = [item for item in pending if item.ask is None]
    located = (yield Locate(tuple(item.route for item in routed))) if routed else []
    groups = _by_node(routed, located)
    for item in pending:
        if item.ask is not None:
            groups.setdefault(("ask", item.ask), []).append(item)
    return list(groups.values())


def _grouped(items: list[_Item], located: Sequence[Any]) -> list[list[_Item]]:
    return list(_by_node(items, located).values())


def _by_node(items: list[_Item], located: Sequence[Any]) -> dict[Any, list[_Item]]:
    groups: dict[Any, list[_Item]] = {}
    for item, found in zip(items, located, strict=True):
        if isinstance(found, BaseException):
            # No node known for that slot now: send by route, and let the
            # failure to reach it be handled like any other.
            groups.setdefault(("route", item.route), []).append(item)
        else:
            key, item.node = found
            groups.setdefault(("node", key), []).append(item)
    return groups
