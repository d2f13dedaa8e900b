"""The row cache (Redis in Action 2.4): database rows kept fresh in Redis,
one package:

- ``ops``: the schedule, the reads and the ticketed write path: I/O-free
  generators; ``refresh``: the workers' rounds that reload due rows;
- ``row_*.lua``: their scripts;
- ``codec``: the JSON that holds one row in Redis;
- ``source``: where rows come from (:class:`Source`, :class:`FunctionSource`);
  ``sql``: tables of a SQL database (:class:`~webtier.rows.sql.SqlSource`,
  needs the ``sql`` extra, so it is imported from there);
- ``aio``: the ``tier.rows`` part; ``sync``: its sync twin, generated from ``aio``.

See docs/rows.md.
"""

from webtier.rows.source import FunctionSource, Row, Source

__all__ = ["FunctionSource", "Row", "Source"]
