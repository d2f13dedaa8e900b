"""The sessions benchmark: webtier's sessions and carts against the book's
listings 2.1-2.5 and 2.9 (:mod:`benchmarks.book`), on the same server,
in one run.

Rows (docs/benchmarks.md says more):

* touch with an item -- ``tier.sessions.touch(token, item=...)`` (one round
  trip: the session script and the ranking's ZINCRBY) vs the book's
  ``update_token`` (five), 1 and N processes, next to the raw limit of those
  two commands from ``redis-benchmark``;
* check -- ``tier.sessions.check`` vs the book's ``check_token`` (one HGET each);
* server CPU per touch -- the server process's CPU time per touch, both sides;
* cleanup -- sessions removed per second by the race-free cleaner vs the
  book's ``clean_full_sessions``, over sessions with viewed items and carts;
* memory per session -- 25 viewed items and a 3-line cart, both layouts
  (webtier's holding 27, the most a full session holds between trims),
  extrapolated to 10 million sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial

from benchmarks import _session_workloads as w
from benchmarks import book
from benchmarks._counter_workloads import client_on
from benchmarks._harness import Contender, Harness, Pass
from benchmarks._loops import Loop
from benchmarks._results import Goal, Measurement, Row
from webtier import sessions
from webtier._core.protocol import Chain, Command, ScriptCall
from webtier.config import Config
from webtier.ranking.views import ViewCounter

TITLE = "webtier bench sessions"

CLEANUP_SESSIONS = 200_000
MEMORY_SESSIONS = 20_000
EXTRAPOLATE_TO = 10_000_000

WEBTIER_TOUCH = frozenset({"evalsha", "zincrby"})
BOOK_TOUCH = frozenset({"hset", "zadd", "zremrangebyrank", "zincrby"})
CHECK = frozenset({"hget"})
# evalsha's time holds the commands its scripts run (listed again on their own)
WEBTIER_CLEAN = frozenset({"evalsha"})
BOOK_CLEAN = frozenset({"zcard", "zrange", "del", "hdel", "zrem"})

TOUCH_GOALS = {1: (Goal(3.5),), 4: (Goal(3.0),)}
CLEANUP_GOALS = (Goal(2.0),)
MEMORY_GOALS = (Goal(0.8, at_least=False),)

CPU_NOTE = (
    "server process CPU (INFO cpu, user + system) per touch, network system calls "
    "included: the book's 5 round trips each cost their reads and writes"
)


def run(h: Harness) -> list[Row]:
    """Every sessions comparison, in the order of the report."""
    rows: list[Row] = []
    touches = _pairs(h, "touch", w.webtier_touch, w.book_touch, WEBTIER_TOUCH, BOOK_TOUCH)
    raws = _raw_limits(h)
    for processes, (ours, theirs) in touches.items():
        rows.append(
            Row(
                "touch with an item",
                "ops/s",
                processes,
                ours,
                theirs,
                raw=raws.get(processes),
                goals=TOUCH_GOALS.get(processes, ()),
                note="webtier: 1 round trip (the script counts the view); the book: 5",
            )
        )
    for processes, (ours, theirs) in touches.items():
        rows.append(
            Row(
                "server CPU per touch",
                "CPU µs/op",
                processes,
                _cpu(ours),
                _cpu(theirs),
                note=CPU_NOTE,
            )
        )
    checks = _pairs(h, "check", w.webtier_check, w.book_check, CHECK, CHECK)
    for processes, (ours, theirs) in checks.items():
        rows.append(Row("check", "ops/s", processes, ours, theirs, note="one HGET each"))
    rows.append(_cleanup(h))
    rows.append(_memory(h))
    return rows


def _pairs(
    h: Harness,
    what: str,
    ours: Callable[[str], AbstractContextManager[Loop]],
    theirs: Callable[[str], AbstractContextManager[Loop]],
    our_commands: frozenset[str],
    their_commands: frozenset[str],
) -> dict[int, tuple[Measurement, Measurement]]:
    found = {}
    for n in h.settings.processes:
        h.server.flush()
        mine, book_side = h.loops(
            [
                Contender(f"webtier {what}", partial(ours, h.server.url), our_commands),
                Contender(f"book {what}", partial(theirs, h.server.book_url), their_commands),
            ],
            n,
        )
        found[n] = (mine, book_side)
    return found


def _cpu(m: Measurement) -> Measurement:
    """The server CPU µs per operation of ``m``, as a figure of its own."""
    return Measurement(f"{m.name}: server CPU", m.clients, "CPU µs/op", m.cpu_us)


def _raw_limits(h: Harness) -> dict[int, Measurement | None]:
    h.server.flush()
    with w.tier_on(h.server.url) as tier:
        token = tier.sessions.new()
        config: Config = tier.config
    # A single server's touch, as a tier sends it between two upkeeps of the
    # ranking (its first view of a process carries one): the script alone,
    # which counts the view itself.
    views = ViewCounter(config, one_node=True)
    views.upkeep_due(w.ITEMS[0])
    step = next(sessions.ops.touch(config, token, item=w.ITEMS[0], views=views))
    if not isinstance(step, Chain):
        raise TypeError(f"touch sent {step!r}, not a chain of requests")
    h.server.admin.script_load(sessions.layout.TOUCH.source)
    commands: list[tuple[Command, float]] = []
    for request in step.requests:
        (command,) = request.commands
        commands.append((command.command() if isinstance(command, ScriptCall) else command, 1.0))
    note = "the same session and item every time: the script, which counts the view"
    return {
        clients: h.raw("raw: webtier touch", commands, clients, h.server.admin, note=note)
        for clients in h.settings.processes
    }


def _cleanup(h: Harness) -> Row:
    size = h.settings.size(CLEANUP_SESSIONS)

    def prepare_ours() -> None:
        h.server.flush()
        w.load_webtier(h.server.url, size)

    def prepare_theirs() -> None:
        h.server.flush()
        w.load_book(h.server.book_url, size)

    with w.tier_on(h.server.url) as tier, client_on(h.server.book_url) as conn:

        def ours() -> int:
            return tier.sessions.clean(keep=0).deleted

        def theirs() -> int:
            removed = 0
            while step := book.clean_full_sessions_step(conn, limit=0):
                removed += step
            return removed

        ours_m, theirs_m = h.passes(
            [
                Pass("webtier sessions.clean", prepare_ours, ours, WEBTIER_CLEAN),
                Pass("book clean_full_sessions", prepare_theirs, theirs, BOOK_CLEAN),
            ],
            "tokens/s",
        )
    h.server.flush()
    note = (
        f"{size:,} sessions, each with 25 viewed items and a 3-line cart, all removed "
        "(limit 0); webtier removes up to 5,000 a step, race-free (a score bound per shard, "
        "checked in the removing script), the book 100 a step, with the race"
    )
    return Row("cleanup", "tokens/s", 1, ours_m, theirs_m, goals=CLEANUP_GOALS, note=note)


def _memory(h: Harness) -> Row:
    size = h.settings.size(MEMORY_SESSIONS)
    unit = "bytes/session"
    ours = h.memory(
        "webtier layout",
        partial(w.load_webtier, h.server.url, size),
        partial(w.webtier_sessions, h.server.url),
        unit,
    )
    theirs = h.memory(
        "book layout",
        partial(w.load_book, h.server.book_url, size),
        partial(w.book_sessions, h.server.book_url),
        unit,
    )
    h.server.flush()
    gib = 2**30
    note = (
        f"used_memory growth per session, with a user, 25 viewed items and a 3-line cart "
        f"(webtier: {w.HELD} held, the most between two trims); "
        f"for {EXTRAPOLATE_TO:,} sessions: webtier {ours.value * EXTRAPOLATE_TO / gib:.1f} GiB, "
        f"the book {theirs.value * EXTRAPOLATE_TO / gib:.1f} GiB; webtier also keeps the "
        "created time, a public id and the per-user index"
    )
    return Row("memory per session", unit, None, ours, theirs, goals=MEMORY_GOALS, note=note)
