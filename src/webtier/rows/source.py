"""Where cached rows come from: a :class:`Source` names a row cache in
Redis and loads rows by key.

A source answers one question, blocking: *the rows of these keys, as
dicts*. The row cache runs it in the caller's thread (sync API) or in a
worker thread (asyncio API). Keys are the text form of row ids (``42`` ->
``"42"``), which is what Redis stores. Tables of a SQL database are
:class:`webtier.rows.sql.SqlSource`; :class:`FunctionSource` wraps a
function of one key, as the book's ``Inventory.get``.
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webtier._core.keys import check_int_id, check_name, check_source_name
from webtier.errors import ConfigError, InvalidInput

Row = Mapping[str, Any]


class Source(abc.ABC):
    """A row source: a name for its cache, and a way to load rows by key."""

    def __init__(self, name: str) -> None:
        self.name = check_source_name(name)
        # The key prefixes where this source's origin was found recorded
        # (see :meth:`origin`): checked once per prefix, on first use.
        self.checked_prefixes: set[str] = set()

    def origin(self) -> str | None:
        """Where the rows come from, recorded beside the cache in Redis at
        first use, so that another source of the same name reading another
        database is refused (:class:`~webtier.errors.SourceConflict`)
        rather than served this one's rows. ``None``: nothing to record (a
        function's rows have no database to name)."""
        return None

    def key(self, row_id: object) -> str:
        """The text that stands for ``row_id`` in Redis: ints and UUIDs in
        their canonical text, strings as they are."""
        if isinstance(row_id, bool):
            raise InvalidInput("row_id", "must be an int, a str or a UUID, not a bool", row_id)
        if isinstance(row_id, int):
            return check_int_id("row_id", row_id)
        if isinstance(row_id, uuid.UUID):
            return str(row_id)
        if isinstance(row_id, str):
            return check_name("row_id", row_id)
        raise InvalidInput(
            "row_id", f"must be an int, a str or a UUID, not {type(row_id).__name__}", row_id
        )

    @abc.abstractmethod
    def load(self, keys: Sequence[str]) -> dict[str, Row]:
        """The rows of ``keys`` (texts from :meth:`key`), by key; a key whose
        row does not exist is left out. Blocking."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def check_source(source: object) -> Source:
    """``source`` if it is a row source, else InvalidInput."""
    if not isinstance(source, Source):
        raise InvalidInput(
            "source", f"must be a row source (webtier.Source), not {type(source).__name__}", source
        )
    return source


class FunctionSource(Source):
    """Rows from a function of one key: ``load(key) -> dict | None``, where
    ``None`` means the row does not exist (the book's ``Inventory.get``).
    One call per row, so no batching; prefer :class:`SqlSource` for tables."""

    def __init__(self, name: str, load: Callable[[str], Row | None]) -> None:
        super().__init__(name)
        if not callable(load):
            raise ConfigError(f"load must be a function of one key, not {type(load).__name__}")
        self._load = load

    def load(self, keys: Sequence[str]) -> dict[str, Row]:
        found = {}
        for key in keys:
            row = self._load(key)
            if row is not None:
                found[key] = row
        return found
