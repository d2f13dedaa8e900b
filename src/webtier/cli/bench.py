"""``webtier bench``: the benchmarks come with the repository, not the wheel.

They are the top-level ``benchmarks`` package of the checkout. An editable
install (``pip install -e '.[test]'``) puts only ``src/`` on ``sys.path``, so
the checkout, found from this file's own place, is appended to the path: last,
so it never shadows an installed package, and on the path rather than loaded
from a file, so the benchmark's client processes (started with ``spawn``,
which hands them the parent's ``sys.path``) import it too.
"""

from __future__ import annotations

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
        checkout = str(where.parent)
        if checkout not in sys.path:
            sys.path.append(checkout)
    try:
        from benchmarks.cli import bench
    except ModuleNotFoundError as error:
        if error.name != PACKAGE:
            raise
        raise click.ClickException(NOT_HERE) from None
    return bench


def bench() -> click.Command:
    return load(checkout_benchmarks())
