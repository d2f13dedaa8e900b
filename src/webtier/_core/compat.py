"""Deprecated names: a public name that moved keeps working for a while,
with a DeprecationWarning that says where it lives now."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def moved(module: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving each old name in ``names`` from its
    new home, given as ``"package.module:Name"``."""

    def __getattr__(name: str) -> Any:
        where = names.get(name)
        if where is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home, _, new = where.partition(":")
        warnings.warn(
            f"{module}.{name} is deprecated; use {home}.{new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), new)

    return __getattr__
