"""Names a web package serves from an adapter only when first used: the
ASGI adapters need Starlette (``webtier[web]``), which a WSGI, Flask or
Django app need not install."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy(module: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` importing each name of ``names`` from the
    module given for it on first use; any other name is an AttributeError."""

    def __getattr__(name: str) -> Any:
        home = names.get(name)
        if home is not None:
            return getattr(importlib.import_module(home), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
