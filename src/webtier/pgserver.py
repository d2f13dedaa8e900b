"""Deprecated: the throwaway PostgreSQL is :mod:`webtier.testing.pgserver`."""

from webtier._core.compat import moved

__getattr__ = moved(
    __name__,
    {
        "PostgresServer": "webtier.testing.pgserver:PostgresServer",
        "find_postgres_bin": "webtier.testing.pgserver:find_postgres_bin",
    },
)
