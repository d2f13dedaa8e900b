"""``webtier bench``: the benchmarks come with the repository, not the wheel.

They are the top-level ``benchmarks`` package of the checkout. An editable
install (``pip install -e '.[test]'``) puts only ``src/`` on ``sys.path``, so
the package is imported from its place beside ``src/``, found from this
file's own, without putting the checkout (and its ``tests``) on the path.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import click

PACKAGE = "benchmarks"
SHORT_HELP = "Benchmarks: webtier against the book's listings on a real Redis."
NOT_HERE = (
    "webtier bench comes with the repository checkout, not the wheel: "
    "git clone the repository and pip install -e '.[test]' in it"
)


def checkout_benchmarks() -> Path | None:
    """``benchmarks/`` of the checkout webtier runs from, if it runs from one
    (``src/webtier/cli/bench.py``, with the project's ``pyproject.toml``)."""
    root = Path(__file__).resolve().parents[3]
    found = root / PACKAGE
    if (root / "pyproject.toml").is_file() and (found / "__init__.py").is_file():
        return found
    return None


def load(where: Path | None) -> click.Command:
    """The ``bench`` group, from ``where`` unless a ``benchmarks`` package is
    already imported (the test suite, run from the checkout, imports it)."""
    if PACKAGE not in sys.modules and where is not None:
        spec = importlib.util.spec_from_file_location(
            PACKAGE, where / "__init__.py", submodule_search_locations=[str(where)]
        )
        if spec is None or spec.loader is None:  # pragma: no cover - a file, so a loader
            raise click.ClickException(NOT_HERE)
        package = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = package
        spec.loader.exec_module(package)
    try:
        from benchmarks.cli import bench
    except ModuleNotFoundError as error:
        if error.name != PACKAGE:
            raise
        raise click.ClickException(NOT_HERE) from None
    return bench


def bench() -> click.Command:
    return load(checkout_benchmarks())
