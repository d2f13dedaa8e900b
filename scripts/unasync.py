"""Generate each sync module from its asyncio twin, so the two never drift.

Every pair below is an asyncio module written by hand and the sync module
written from it by token rules (the approach of httpcore's and psycopg's
generators): ``async def`` -> ``def``, ``await x`` -> ``x``, ``Async*``
names -> their sync twins, ``.aio`` modules -> ``.sync`` ones, and a few
phrases of each pair's docstrings. Where the sync and asyncio code differ by
more than that (a thread or a task), the difference lives in a shared
module both import (``webtier._core.flush``), never in a rule.

Every rule must rewrite something in every run, and each pair's phrases
something in that pair: a rule that stops matching (its text was edited
away) fails the run, ``--check`` included, instead of leaving the sync twin
silently different. ``--check`` exits 1 when a committed sync module
differs from what this would write (``scripts/check`` runs it).

    python scripts/unasync.py [--check]
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "webtier"


@dataclass(frozen=True)
class Rule:
    """One rewrite: ``pattern`` (a regular expression) to ``replacement``."""

    pattern: re.Pattern[str]
    replacement: str | Callable[[re.Match[str]], str]

    def apply(self, text: str) -> tuple[str, int]:
        return self.pattern.subn(self.replacement, text)

    def __str__(self) -> str:
        return self.pattern.pattern


def phrase(old: str, new: str) -> Rule:
    """``old``, word for word, becomes ``new``."""
    return Rule(re.compile(re.escape(old)), new.replace("\\", "\\\\"))


def word(old: str, new: str) -> Rule:
    """The name ``old`` (a whole word) becomes ``new``."""
    return Rule(re.compile(rf"\b{re.escape(old)}\b"), new)


def _unawait(text: str) -> tuple[str, int]:
    """The ``Coroutine[Any, Any, X]`` rule: a regular expression cannot
    match nested brackets, so it is a function of its own."""
    found = 0
    head = "Coroutine[Any, Any, "
    while (at := text.find(head)) != -1:
        start, depth, end = at + len(head), 1, at + len(head)
        while depth:
            depth += {"[": 1, "]": -1}.get(text[end], 0)
            end += 1
        text = text[:at] + text[start : end - 1] + text[end:]
        found += 1
    return text, found


# What every pair shares: the asyncio spellings and the twins' names.
COMMON: list[Rule] = [
    Rule(re.compile(r"\basync def\b"), "def"),
    Rule(re.compile(r"\bawait "), ""),
    Rule(re.compile(r"\basync with\b"), "with"),
    phrase("from webtier.aio import WebTier as AsyncWebTier", "from webtier.sync import WebTier"),
    # Imports: webtier.<capability>.aio -> webtier.<capability>.sync.
    Rule(re.compile(r"(?m)^(from webtier(?:\.\w+)*)\.aio\b"), r"\1.sync"),
    word("aclose", "close"),
    word("__aenter__", "__enter__"),
    word("__aexit__", "__exit__"),
    word("AsyncFlusher", "SyncFlusher"),
    word("AsyncPeriodic", "SyncPeriodic"),
    word("async_op", "sync_op"),
    word("AsyncRecorder", "Recorder"),
    word("AsyncStatsRecorder", "StatsRecorder"),
    word("AsyncAccessTimer", "AccessTimer"),
    word("AsyncViewAggregator", "ViewAggregator"),
    word("AsyncTopItems", "TopItems"),
    word("AsyncSession", "Session"),
    word("AsyncWebTier", "WebTier"),
    # Docstrings.
    phrase(" (create it in a running loop)", ""),
    phrase("\n        Create it in a running loop.", ""),
    phrase("for the asyncio API", "for the sync API"),
    phrase("from a task", "from a daemon thread"),
    phrase("each call of a coroutine function", "each call of a function"),
]


@dataclass(frozen=True)
class Pair:
    """An asyncio module and the sync module written from it, with the
    phrases of this pair alone (applied first)."""

    source: Path
    target: Path
    phrases: list[Rule] = field(default_factory=list)

    @property
    def header(self) -> str:
        source = self.source.relative_to(ROOT)
        return f"# Generated from {source} by scripts/unasync.py: do not edit.\n"


PAIRS = [
    Pair(
        SRC / "counters" / "aio.py",
        SRC / "counters" / "sync.py",
        [
            phrase("The counters' asyncio API", "The counters' sync API"),
            phrase(
                ":mod:`webtier.counters.sync` is generated from this\nmodule",
                "It is generated from :mod:`webtier.counters.aio`",
            ),
        ],
    ),
    Pair(
        SRC / "stats" / "aio.py",
        SRC / "stats" / "sync.py",
        [
            phrase("The statistics' asyncio API", "The statistics' sync API"),
            phrase(
                ":mod:`webtier.stats.sync` is generated from this module",
                "It is generated from :mod:`webtier.stats.aio`",
            ),
            phrase("import inspect\n", ""),
            phrase(
                "from collections.abc import Callable, Coroutine",
                "from collections.abc import Callable",
            ),
            phrase(" A cancelled\n    block is not recorded.", ""),
            phrase(
                "        if not inspect.iscoroutinefunction(function):\n"
                '            raise TypeError("the asyncio access_time decorates coroutine functions'
                ' (async def)")\n\n',
                "",
            ),
        ],
    ),
    Pair(
        SRC / "ranking" / "aio.py",
        SRC / "ranking" / "sync.py",
        [
            phrase("The ranking's asyncio API", "The ranking's sync API"),
            phrase(
                ":mod:`webtier.ranking.sync` is generated from this module",
                "It is generated from :mod:`webtier.ranking.aio`",
            ),
            phrase(
                "from collections.abc import Callable, Coroutine",
                "from collections.abc import Callable",
            ),
        ],
    ),
    Pair(
        SRC / "rows" / "aio.py",
        SRC / "rows" / "sync.py",
        [
            phrase("The row cache's asyncio API", "The row cache's sync API"),
            phrase(
                ":mod:`webtier.rows.sync` is generated from this module",
                "It is generated from :mod:`webtier.rows.aio`",
            ),
        ],
    ),
    Pair(
        SRC / "pagecache" / "aio.py",
        SRC / "pagecache" / "sync.py",
        [
            phrase("The page cache's asyncio API", "The page cache's sync API"),
            phrase(
                ":mod:`webtier.pagecache.sync` is generated from this module",
                "It is generated from :mod:`webtier.pagecache.aio`",
            ),
        ],
    ),
    Pair(
        SRC / "sessions" / "aio.py",
        SRC / "sessions" / "sync.py",
        [
            phrase("The sessions' and carts' asyncio API", "The sessions' and carts' sync API"),
            phrase(
                ":mod:`webtier.sessions.sync` is generated from this\nmodule",
                "It is generated from :mod:`webtier.sessions.aio`",
            ),
        ],
    ),
    Pair(
        SRC / "workers" / "aio.py",
        SRC / "workers" / "sync.py",
        [
            phrase("The workers' asyncio API", "The workers' sync API"),
            phrase(
                ":mod:`webtier.workers.sync` is generated from this module",
                "It is generated from :mod:`webtier.workers.aio`",
            ),
        ],
    ),
    Pair(
        SRC / "deployment" / "aio.py",
        SRC / "deployment" / "sync.py",
        [
            phrase("The deployment settings' asyncio API", "The deployment settings' sync API"),
            phrase(
                ":mod:`webtier.deployment.sync` is generated from this module",
                "It is generated from :mod:`webtier.deployment.aio`",
            ),
        ],
    ),
    Pair(
        SRC / "web" / "sessions" / "aio.py",
        SRC / "web" / "sessions" / "sync.py",
        [
            phrase(
                "on an asyncio\ntier (the ASGI adapter): :class:`AsyncSession`, each method a"
                " coroutine.\n:mod:`webtier.web.sessions.sync` is generated from this module\n"
                "(scripts/unasync.py).",
                "on a sync tier\n(the WSGI, Flask and Django adapters): :class:`Session`. It is"
                " generated\nfrom :mod:`webtier.web.sessions.aio` (scripts/unasync.py).",
            ),
            phrase("on an asyncio tier (each method a coroutine)", "on a sync tier"),
        ],
    ),
    Pair(
        SRC / "aio.py",
        SRC / "sync.py",
        [
            phrase(
                "The asyncio API: :class:`WebTier` over an asyncio client, webtier's own\n"
                "(:func:`webtier.connect_async`) or redis-py's.",
                "The sync API: :class:`WebTier` over a sync redis-py client.",
            ),
            phrase(
                "from webtier._core.mux import AnyAsyncClient, async_transport\n",
                "from webtier._core.drive import SyncClient, SyncTransport\n",
            ),
            phrase("client: AnyAsyncClient,", "client: SyncClient,"),
            phrase("async_transport(client,", "SyncTransport(client,"),
            phrase(
                ":mod:`webtier.sync` has the same classes and\nmethod names; both",
                ":mod:`webtier.aio` has the same classes and\nmethod names for asyncio; both",
            ),
            phrase(
                "package's own (``webtier.counters.aio``...)",
                "package's own (``webtier.counters.sync``...)",
            ),
            phrase(
                "one asyncio client, which it uses but does not own:\n"
                "    webtier's own (:func:`webtier.connect_async`), or a redis-py one\n"
                "    (``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``).",
                "one sync redis-py client (``redis.Redis`` or\n"
                "    ``redis.cluster.RedisCluster``), which it uses but does not own.",
            ),
        ],
    ),
]


class StaleRule(Exception):
    """A rule rewrote nothing: the asyncio sources moved on without it."""


def generate(
    pairs: Iterable[Pair], read: Callable[[Path], str] = Path.read_text
) -> dict[Path, str]:
    """The sync module of each pair, by target. Raises :class:`StaleRule`
    naming every rule that matched nothing (a pair's phrases in that pair,
    the common rules in all of them together)."""
    written: dict[Path, str] = {}
    used = dict.fromkeys(map(str, COMMON), 0)
    used["Coroutine[Any, Any, X]"] = 0
    stale = []
    for pair in pairs:
        text = read(pair.source)
        for rule in pair.phrases:
            text, count = rule.apply(text)
            if not count:
                stale.append(f"{pair.source.relative_to(ROOT)}: {rule}")
        for rule in COMMON:
            text, count = rule.apply(text)
            used[str(rule)] += count
        text, count = _unawait(text)
        used["Coroutine[Any, Any, X]"] += count
        written[pair.target] = formatted(pair.header + text, pair.target)
    stale += [f"every pair: {rule}" for rule, count in used.items() if not count]
    if stale:
        raise StaleRule("rules that rewrote nothing: " + "; ".join(stale))
    return written


def formatted(source: str, target: Path) -> str:
    """``source`` as ``ruff format`` leaves it, so a rule that shortens a line
    never leaves the generated file for the formatter to change."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        return source
    done = subprocess.run(
        [ruff, "format", "--stdin-filename", str(target), "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout


def stale_targets(written: Mapping[Path, str]) -> list[Path]:
    return [t for t, text in written.items() if not t.exists() or t.read_text() != text]


def main(argv: list[str], read: Callable[[Path], str] = Path.read_text) -> int:
    check = "--check" in argv
    try:
        written = generate(PAIRS, read)
    except StaleRule as error:
        print(f"scripts/unasync.py: {error}", file=sys.stderr)
        return 1
    stale = stale_targets(written)
    if check:
        for target in stale:
            print(f"{target} is stale: run python scripts/unasync.py", file=sys.stderr)
        return 1 if stale else 0
    for target in stale:
        target.write_text(written[target])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
