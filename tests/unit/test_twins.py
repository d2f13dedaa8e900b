"""The sync and asyncio APIs are twins: the same classes with the same public
methods and signatures, an asyncio method being a coroutine where its sync
twin blocks. A method added, renamed or changed on one side only fails here."""

from __future__ import annotations

import inspect
import re
import sys
from typing import Any

import pytest

import webtier
from webtier import aio, sync
from webtier._core.drive import AsyncTransport, SyncTransport
from webtier._core.facade import _Bound
from webtier.web.sessions import AsyncSession, Session
from webtier.workers import AsyncWorker, Worker

# (sync, asyncio) pairs beyond the facade's parts, found below.
PAIRS: list[tuple[type, type]] = [
    (sync.WebTier, aio.WebTier),
    (SyncTransport, AsyncTransport),
    (Worker, AsyncWorker),
    (webtier.AccessTimer, webtier.AsyncAccessTimer),
    (webtier.Recorder, webtier.AsyncRecorder),
    (webtier.StatsRecorder, webtier.AsyncStatsRecorder),
    (webtier.TopItems, webtier.AsyncTopItems),
    (webtier.ViewAggregator, webtier.AsyncViewAggregator),
    (Session, AsyncSession),  # a request's session in the web middlewares
]
# The asyncio spelling of a sync name (Python's own conventions).
ASYNC_NAME = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__"}


def _parts(tier_class: type) -> dict[str, type]:
    """The facade's parts (``self.counters = Counters(run, ...)``), by attribute."""
    module = sys.modules[tier_class.__module__]
    source = inspect.getsource(tier_class.__init__)
    return {
        name: getattr(module, cls) for name, cls in re.findall(r"self\.(\w+) = (\w+)\(run", source)
    }


def _all_pairs() -> list[tuple[type, type]]:
    pairs = list(PAIRS)
    sync_parts, async_parts = _parts(sync.WebTier), _parts(aio.WebTier)
    assert sync_parts.keys() == async_parts.keys(), "the facades have different parts"
    assert sync_parts, "no parts found: the facade's __init__ changed shape"
    pairs += [(sync_parts[name], async_parts[name]) for name in sorted(sync_parts)]
    return pairs


def _public(cls: type) -> dict[str, Any]:
    found = {}
    for name in dir(cls):
        if name.startswith("_") and name not in ASYNC_NAME and name not in ASYNC_NAME.values():
            continue
        if name in ("__init__",):
            continue
        found[name] = inspect.getattr_static(cls, name)
    return found


def _plain(annotation: str) -> str:
    """An annotation with asyncio spellings made sync, to compare the two."""
    annotation = re.sub(r"Coroutine\[Any, Any, (.+)\]$", r"\1", annotation)
    annotation = re.sub(r"\bAsync(?=[A-Z])", "", annotation)
    annotation = re.sub(r"\bSync(?=[A-Z])", "", annotation)
    return annotation.replace("asyncio.Event", "threading.Event")


def _signature(member: Any) -> object:
    if isinstance(member, _Bound):  # sync_op(op) / async_op(op): the same operation
        return f"{member._op.__module__}.{member._op.__qualname__}"
    function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
    if isinstance(function, property):
        return None
    if not callable(function):
        return None
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    return [
        (p.name, str(p.kind), repr(p.default), _plain(str(p.annotation)))
        for p in signature.parameters.values()
    ] + [("->", "", "", _plain(str(signature.return_annotation)))]


def differences(sync_class: type, async_class: type) -> list[str]:
    """How two twins differ: public names, signatures, blocking vs coroutine."""
    sync_members = _public(sync_class)
    async_members = {
        next((s for s, a in ASYNC_NAME.items() if a == name), name): member
        for name, member in _public(async_class).items()
    }
    found = [
        f"only in {sync_class.__name__}: {n}" for n in sync_members.keys() - async_members.keys()
    ]
    found += [
        f"only in {async_class.__name__}: {n}" for n in async_members.keys() - sync_members.keys()
    ]
    for name in sync_members.keys() & async_members.keys():
        member, twin = sync_members[name], async_members[name]
        if _signature(member) != _signature(twin):
            found.append(f"{name}: {_signature(member)} != {_signature(twin)}")
        if inspect.iscoroutinefunction(member):
            found.append(f"{name}: the sync twin is a coroutine function")
    return sorted(found)


@pytest.mark.parametrize(
    ("sync_class", "async_class"), _all_pairs(), ids=lambda c: f"{c.__module__}.{c.__qualname__}"
)
def test_sync_and_asyncio_twins_match(sync_class: type, async_class: type) -> None:
    assert differences(sync_class, async_class) == []


def test_a_drifted_twin_is_caught() -> None:
    class Before:
        def get(self, name: str, limit: int = 10) -> list[str]: ...
        def close(self) -> None: ...

    class AsyncRenamed:
        async def get(self, name: str, limit: int = 10) -> list[str]: ...
        async def shut(self) -> None: ...

    class AsyncDefault:
        async def get(self, name: str, limit: int = 20) -> list[str]: ...
        async def aclose(self) -> None: ...

    class AsyncSame:
        async def get(self, name: str, limit: int = 10) -> list[str]: ...
        async def aclose(self) -> None: ...

    assert differences(Before, AsyncSame) == []
    assert differences(Before, AsyncRenamed) == [
        "only in AsyncRenamed: shut",
        "only in Before: close",
    ]
    assert len(differences(Before, AsyncDefault)) == 1
