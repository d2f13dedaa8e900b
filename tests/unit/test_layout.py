"""The package's shape, checked: a capability is a package and the engine
(``webtier._core``) knows none of them; no import cycle between webtier's
modules; no module over 450 lines (a module that grows past it holds two
ideas). Every import counts, wherever it is: at a module's top, in a
function (a lazy import is a dependency all the same) or for the type
checker alone."""

from __future__ import annotations

import ast
from pathlib import Path

import webtier

ROOT = Path(webtier.__file__).parent
MAX_LINES = 450
# What the engine may import besides itself: the settings, the errors and
# the values every call returns. Every capability sits above it.
BELOW_CORE = ("webtier.config", "webtier.errors", "webtier.types")
# A capability's package holds its operations and its facade part:
# ops (or jobs), aio.py and the sync.py generated from it.
CAPABILITIES = (
    "counters",
    "stats",
    "ranking",
    "rows",
    "pagecache",
    "sessions",
    "workers",
    "deployment",
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The webtier modules ``path`` imports, wherever it does: at its top, in
    a function (a lazy import is a dependency all the same) or for the type
    checker alone (two modules that need each other's types are one idea)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in modules else base)
    return {m for m in found if m in modules and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in graph[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, name, modules) for name, path in modules.items()}


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Imports from the engine into anything but the engine and what it
    stands on: a capability, the facades, the web adapters..."""

    def allowed(target: str) -> bool:
        return (
            target == "webtier._core"
            or target.startswith("webtier._core.")
            or any(target == below or target.startswith(f"{below}.") for below in BELOW_CORE)
        )

    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("webtier._core")
        for target in targets
        if not allowed(target)
    )


def test_the_engine_imports_no_capability() -> None:
    assert _upward(_graph()) == []


def test_the_engine_check_finds_an_upward_import() -> None:
    graph = {
        "webtier._core.wire": {"webtier._core.actions", "webtier.errors"},
        "webtier._core.facade": {"webtier.config", "webtier.sessions.layout"},
    }
    assert _upward(graph) == ["webtier._core.facade -> webtier.sessions.layout"]


def test_every_capability_is_a_package_with_its_part() -> None:
    for name in CAPABILITIES:
        package = ROOT / name
        assert (package / "__init__.py").is_file(), f"webtier.{name} is not a package"
        assert (package / "aio.py").is_file(), f"webtier.{name} has no facade part"
        assert (package / "sync.py").is_file(), f"webtier.{name}.aio has no generated twin"


def test_no_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_over_450_lines() -> None:
    long = {
        str(path.relative_to(ROOT.parent)): lines
        for path in ROOT.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
