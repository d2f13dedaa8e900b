"""Rows of a SQL table, through SQLAlchemy 2: SQLite, PostgreSQL, any
database SQLAlchemy speaks.

A table is declared once, with its key column and the columns a cached row
holds, and no SQL is written by hand::

    inventory = SqlSource(
        "inventory", "inventory", key="item_id",
        columns=("item_id", "name", "price", "stock"),
        database="postgresql+psycopg://shop@db/shop",   # or an Engine
    )

Many rows are loaded with one ``SELECT ... WHERE key IN (...)``.

A source only reads: from a URL it never creates a SQLite file (a typo in
the path would otherwise read as an empty table), and a missing table, file
or database driver is a :class:`~webtier.errors.SourceError` (or
:class:`~webtier.errors.MissingExtra`) that names it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from webtier._core.extras import extra_needed
from webtier.errors import ConfigError, InvalidInput, SourceError
from webtier.rows.source import Row, Source

with extra_needed("sql", "SQL row sources"):
    import sqlalchemy as sa

# A URL that names no driver gets the one webtier's extra installs (SQLAlchemy's
# own default for postgresql:// is psycopg2, which no extra brings).
_DEFAULT_DRIVERS = {"postgresql": "psycopg"}


def shown(url: sa.URL) -> str:
    """A database URL as messages show it: without its password."""
    return url.render_as_string(hide_password=True)


def open_engine(database: str | sa.URL, *, create: bool = False) -> sa.Engine:
    """An engine on ``database``. A SQLite file must exist unless ``create``
    (only ``webtier rows init`` creates one), and stays uncreated even if it
    is deleted later (it is opened read-write, never created). A missing
    driver raises MissingExtra (psycopg) or ConfigError (any other)."""
    url = sa.make_url(database)
    if "+" not in url.drivername and url.drivername in _DEFAULT_DRIVERS:
        url = url.set(drivername=f"{url.drivername}+{_DEFAULT_DRIVERS[url.drivername]}")
    named = url
    if not create:
        url = _sqlite_without_create(url)
    try:
        with extra_needed("postgres", "PostgreSQL row sources"):
            return sa.create_engine(url)
    except ModuleNotFoundError as error:  # SQLAlchemy imports the driver here
        raise ConfigError(
            f"the database driver {error.name!r} for {shown(named)} is not installed: "
            f"pip install {error.name}"
        ) from None


def _sqlite_without_create(url: sa.URL) -> sa.URL:
    path = url.database
    if url.get_backend_name() != "sqlite" or url.get_driver_name() != "pysqlite":
        return url
    if not path or path == ":memory:" or path.startswith("file:"):
        return url  # in memory, or already a URI of the caller's own
    if not Path(path).is_file():
        raise SourceError(
            f"database file {path} not found ({shown(url)}): check the path "
            "(webtier rows init creates the demo shop's)"
        )
    # SQLite's URI form, mode=rw: open the file read-write, never create it.
    return url.set(database=f"file:{Path(path).as_posix()}").update_query_dict(
        {"mode": "rw", "uri": "true"}
    )


def _python_type(column: sa.Column[Any]) -> type | None:
    try:
        kind: type = column.type.python_type
    except NotImplementedError:
        return None
    return kind


class SqlSource(Source):
    """Rows of one table, read through SQLAlchemy: ``key`` is the key column,
    ``columns`` the columns a cached row holds (default: all of them).

    ``table`` is a table name (reflected on first use), a ``sqlalchemy.Table``
    or an ORM class. ``database`` is a SQLAlchemy URL (an engine is made on
    first use) or an ``Engine`` you own.
    """

    def __init__(
        self,
        name: str,
        table: str | sa.Table | type,
        *,
        key: str,
        columns: Sequence[str] | None = None,
        database: str | sa.URL | sa.Engine,
        schema: str | None = None,
    ) -> None:
        super().__init__(name)
        if not isinstance(database, str | sa.URL | sa.Engine):
            raise ConfigError(f"database must be a SQLAlchemy URL or Engine, got {database!r}")
        declared = getattr(table, "__table__", table)
        if not isinstance(declared, str | sa.Table):
            raise ConfigError(f"table must be a name, a Table or an ORM class, got {table!r}")
        if columns is not None and (isinstance(columns, str) or not columns):
            raise ConfigError("columns must be a non-empty sequence of column names")
        self.key_column = key
        self.columns = tuple(columns) if columns is not None else None
        self.schema = schema
        self._url = None if isinstance(database, sa.Engine) else database
        self._engine = database if isinstance(database, sa.Engine) else None
        self._owns_engine = self._engine is None
        self._table = declared if isinstance(declared, sa.Table) else None
        self._table_name = declared if isinstance(declared, str) else declared.name
        self._lock = threading.Lock()
        self._query: tuple[sa.Select[Any], sa.Column[Any], type | None, tuple[str, ...]] | None = (
            None
        )
        # With the table declared, the key's type is known without I/O, and
        # "42" and 42 name the same row. A reflected table's type is not used
        # for keys: the same id must give the same key before and after.
        self._key_kind: type | None = None
        if self._table is not None:
            self._query = self._prepare(self._table)
            self._key_kind = self._query[2]

    def origin(self) -> str:
        """The database (its URL without password; a SQLite file by its
        absolute path) and the table the rows come from."""
        given = self._url if self._url is not None else cast(sa.Engine, self._engine).url
        url = sa.make_url(given)
        path = url.database
        if url.get_backend_name() == "sqlite" and path and path != ":memory:":
            if path.startswith("file:"):  # the read-write URI form open_engine makes
                path = path[len("file:") :]
                url = url.set(query={})
            url = url.set(database=str(Path(path).resolve()))
        table = self._table_name if self.schema is None else f"{self.schema}.{self._table_name}"
        return f"{shown(url)} table {table}"

    @property
    def engine(self) -> sa.Engine:
        """The engine rows are read through (made on first use from a URL)."""
        with self._lock:
            if self._engine is None:
                # Made here only when built from a URL (an Engine is kept as given).
                self._engine = open_engine(cast(str | sa.URL, self._url))
            return self._engine

    def dispose(self) -> None:
        """Close the pooled connections of an engine this source made."""
        with self._lock:
            if self._engine is not None and self._owns_engine:
                self._engine.dispose()

    def key(self, row_id: object) -> str:
        kind = self._key_kind
        if kind is None or kind is str or isinstance(row_id, bool | kind):
            return super().key(row_id)
        try:
            value = kind(row_id) if isinstance(row_id, str) else None
        except ValueError:
            value = None
        if value is None:
            raise InvalidInput("row_id", f"is not a {kind.__name__} key of {self.name}", row_id)
        return super().key(value)

    def _prepare(
        self, table: sa.Table
    ) -> tuple[sa.Select[Any], sa.Column[Any], type | None, tuple[str, ...]]:
        names = self.columns or tuple(table.c.keys())
        missing = [n for n in (self.key_column, *names) if n not in table.c]
        if missing:
            raise ConfigError(f"table {table.name!r} has no column(s) {', '.join(missing)}")
        key = table.c[self.key_column]
        selected = [table.c[n] for n in names]
        if self.key_column not in names:
            selected.append(key)  # to tell the rows apart; not part of the cached row
        kind = _python_type(key)
        if kind not in (int, str, uuid.UUID):
            kind = None
        return sa.select(*selected), key, kind, names

    def _prepared(self) -> tuple[sa.Select[Any], sa.Column[Any], type | None, tuple[str, ...]]:
        if self._query is None:
            engine = self.engine
            with self._lock:
                if self._query is None:
                    self._query = self._prepare(self._reflected(engine))
        return self._query

    def _reflected(self, engine: sa.Engine) -> sa.Table:
        try:
            return sa.Table(
                self._table_name, sa.MetaData(), autoload_with=engine, schema=self.schema
            )
        except sa.exc.NoSuchTableError:
            # SQLAlchemy's message is the bare table name: say what it means.
            raise self._not_found(engine) from None

    def _not_found(self, engine: sa.Engine) -> SourceError:
        table = self._table_name if self.schema is None else f"{self.schema}.{self._table_name}"
        named = engine.url if self._url is None else sa.make_url(self._url)
        return SourceError(f"table {table!r} not found in {shown(named)}")

    def _table_missing(self, engine: sa.Engine) -> bool:
        """Asked after a query failed, to name that cause rather than the
        driver's words for it; False if even that cannot be told."""
        try:
            return not sa.inspect(engine).has_table(self._table_name, schema=self.schema)
        except sa.exc.SQLAlchemyError:
            return False

    def load(self, keys: Sequence[str]) -> dict[str, Row]:
        query, key, kind, names = self._prepared()
        wanted: dict[Any, str] = {}
        for text in keys:
            try:
                wanted[kind(text) if kind is not None else text] = text
            except ValueError:
                continue  # "abc" in an integer column: no such row
        if not wanted:
            return {}
        engine = self.engine
        try:
            with engine.connect() as conn:
                result = conn.execute(query.where(key.in_(list(wanted))))
                columns = list(result.keys())
                at = columns.index(self.key_column)
                found: dict[str, Row] = {}
                for values in result:
                    asked = wanted.get(values[at])
                    if asked is not None:
                        found[asked] = dict(zip(names, values, strict=False))
        except sa.exc.DBAPIError as error:
            if self._table_missing(engine):  # a declared Table, not in this database
                raise self._not_found(engine) from error
            raise
        return found
