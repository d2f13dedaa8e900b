"""Generate the sync facade from the asyncio one, so the two never drift.

``src/webtier/aio.py`` is the source; ``src/webtier/sync.py`` is written from
it by token rules (the approach of httpcore's and psycopg's generators):
``async def`` -> ``def``, ``await x`` -> ``x``, ``Async*`` names -> their sync
twins, and a few phrases of the docstrings. ``--check`` exits 1 when the
committed file differs from what this would write (``scripts/check`` runs it).

    python scripts/unasync.py [--check]
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "webtier"
PAIRS = [(ROOT / "aio.py", ROOT / "sync.py")]

HEADER = "# Generated from aio.py by scripts/unasync.py: edit aio.py, then run the script.\n"

# Whole words: the asyncio name -> its sync twin.
NAMES = {
    "AsyncClient": "SyncClient",
    "AsyncTransport": "SyncTransport",
    "async_op": "sync_op",
    "AsyncTopItems": "TopItems",
    "AsyncViewAggregator": "ViewAggregator",
    "AsyncRecorder": "Recorder",
    "AsyncStatsRecorder": "StatsRecorder",
    "AsyncAccessTimer": "AccessTimer",
}

# Phrases of docstrings and types that say "asyncio" where the sync file says otherwise.
PHRASES = [
    (
        "The asyncio API: :class:`WebTier` over an asyncio client, webtier's own\n"
        "(:func:`webtier.connect_async`) or redis-py's.",
        "The sync API: :class:`WebTier` over a sync redis-py client.",
    ),
    (
        "from webtier._core.facade import Part, async_op\n"
        "from webtier._core.mux import AnyAsyncClient, async_transport\n",
        "from webtier._core.drive import SyncClient, SyncTransport\n"
        "from webtier._core.facade import Part, async_op\n",
    ),
    ("client: AnyAsyncClient,", "client: SyncClient,"),
    ("async_transport(client,", "SyncTransport(client,"),
    (
        "one asyncio client, which it uses but does not own:\n"
        "    webtier's own (:func:`webtier.connect_async`), or a redis-py one\n"
        "    (``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``).",
        "one sync redis-py client (``redis.Redis`` or\n"
        "    ``redis.cluster.RedisCluster``), which it uses but does not own.",
    ),
    (
        ":mod:`webtier.sync` has the same classes and method names; both",
        ":mod:`webtier.aio` has the same classes and method names for asyncio; both",
    ),
    (" (create it in a running loop)", ""),
    ("\n        Create it in a running loop.", ""),
    ("(``async with``)", "(``with``)"),
    ("each call of a coroutine function", "each call of a function"),
    ("from collections.abc import Coroutine\n", ""),
]

RULES = [
    (re.compile(r"\basync def\b"), "def"),
    (re.compile(r"\basync (with|for)\b"), r"\1"),
    (re.compile(r"\bawait "), ""),
    (re.compile(r"Coroutine\[Any, Any, ([^\]]+)\]"), r"\1"),
    (re.compile(r"\b(" + "|".join(NAMES) + r")\b"), lambda m: NAMES[m.group(1)]),
]


def unasync(source: str) -> str:
    for old, new in PHRASES:
        source = source.replace(old, new)
    for pattern, replacement in RULES:
        source = pattern.sub(replacement, source)  # type: ignore[arg-type]
    return formatted(HEADER + source)


def formatted(source: str) -> str:
    """``source`` as ``ruff format`` leaves it, so a rule that shortens a line
    never leaves the generated file for the formatter to change."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        return source
    done = subprocess.run(
        [ruff, "format", "--stdin-filename", "sync.py", "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for source, target in PAIRS:
        wanted = unasync(source.read_text())
        if target.read_text() != wanted:
            stale.append(target)
            if not check:
                target.write_text(wanted)
    if check and stale:
        for target in stale:
            print(f"{target} is stale: run python scripts/unasync.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
