"""scripts/unasync.py: every sync twin is what the script writes from its
asyncio module, and a rule that stops matching (its asyncio text edited
away) fails the run, ``--check`` included, instead of leaving a twin that
differs silently."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync", ROOT / "scripts" / "unasync.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["unasync"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


unasync = _script()


def _drifted(source: str, old: str, new: str) -> object:
    """A reader of the sources in which ``source`` says ``new`` for ``old``."""

    def read(path: Path) -> str:
        text = path.read_text()
        if path.relative_to(ROOT).as_posix() == source:
            assert old in text, "the test's text is no longer in the source"
            text = text.replace(old, new)
        return text

    return read


def test_every_sync_twin_is_generated() -> None:
    written = unasync.generate(unasync.PAIRS)
    assert written, "no pairs"
    assert unasync.stale_targets(written) == []


def test_a_pair_phrase_that_matches_nothing_fails_the_run() -> None:
    read = _drifted(
        "src/webtier/stats/aio.py",
        "if not inspect.iscoroutinefunction(function):",
        "if not inspect.iscoroutinefunction(function) or False:",
    )
    with pytest.raises(
        unasync.StaleRule, match=r"src/webtier/stats/aio\.py: .*iscoroutinefunction"
    ):
        unasync.generate(unasync.PAIRS, read)


def test_a_common_rule_that_matches_nothing_fails_the_run() -> None:
    # The only asyncio name of its kind, renamed in its one source.
    read = _drifted("src/webtier/ranking/aio.py", "AsyncPeriodic", "AsyncRepeat")
    with pytest.raises(unasync.StaleRule, match=r"every pair: .*AsyncPeriodic"):
        unasync.generate(unasync.PAIRS, read)


def test_check_fails_on_a_stale_rule(capsys: pytest.CaptureFixture[str]) -> None:
    read = _drifted("src/webtier/counters/aio.py", "The counters' asyncio API", "Counters")
    assert unasync.main(["--check"], read) == 1
    assert "rules that rewrote nothing" in capsys.readouterr().err
