"""What a benchmark found, as plain values: measurements, the rows that
compare them, the targets printed next to them, and the report.

Targets are reported, never enforced: timings on a shared machine are too
noisy to fail a build on, and a benchmark's job is to tell, not to judge.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Literal


def _median(values: tuple[float, ...]) -> float | None:
    return statistics.median(values) if values else None


@dataclass(frozen=True, slots=True)
class Measurement:
    """One figure, measured ``len(values)`` times; reported as the median."""

    name: str
    clients: int
    unit: str
    values: tuple[float, ...]  # one per run
    server_us: tuple[float, ...] = ()  # INFO commandstats µs per operation, per run
    cpu_us: tuple[float, ...] = ()  # server process CPU µs per operation, per run
    note: str = ""

    @property
    def value(self) -> float:
        return statistics.median(self.values)

    @property
    def server_us_per_op(self) -> float | None:
        return _median(self.server_us)

    @property
    def cpu_us_per_op(self) -> float | None:
        return _median(self.cpu_us)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {
            "median": self.value,
            "server_us_per_op": self.server_us_per_op,
            "cpu_us_per_op": self.cpu_us_per_op,
        }


@dataclass(frozen=True, slots=True)
class Goal:
    """A target: ``of`` (the webtier/book ratio, or webtier's own figure) at
    least, or at most, ``bound``."""

    bound: float
    of: Literal["ratio", "webtier"] = "ratio"
    at_least: bool = True
    unit: str = ""  # of a "webtier" goal, e.g. "incr/s"

    def met(self, row: Row) -> bool | None:
        value = row.ratio if self.of == "ratio" else row.webtier_value
        if value is None:
            return None
        return value >= self.bound if self.at_least else value <= self.bound

    def __str__(self) -> str:
        sign = "≥" if self.at_least else "≤"
        if self.of == "ratio":
            return f"{sign}{self.bound:g}x"
        bound = f"{self.bound:,.0f}" if self.bound >= 100 else f"{self.bound:g}"
        return f"{sign}{bound} {self.unit}".rstrip()


@dataclass(frozen=True, slots=True)
class Row:
    """One comparison: webtier against the book's port, and against the raw
    limit of the command webtier sends where there is one."""

    what: str
    unit: str
    clients: int | None
    webtier: Measurement | None
    book: Measurement | None
    raw: Measurement | None = None
    goals: tuple[Goal, ...] = ()
    note: str = ""

    @property
    def webtier_value(self) -> float | None:
        return self.webtier.value if self.webtier else None

    @property
    def ratio(self) -> float | None:
        """webtier ÷ book (for memory, lower is better)."""
        if self.webtier is None or self.book is None or not self.book.value:
            return None
        return self.webtier.value / self.book.value

    @property
    def raw_ratio(self) -> float | None:
        """webtier ÷ the raw limit."""
        if self.webtier is None or self.raw is None or not self.raw.value:
            return None
        return self.webtier.value / self.raw.value

    @property
    def met(self) -> bool | None:
        verdicts = [goal.met(self) for goal in self.goals]
        if not verdicts or None in verdicts:
            return None
        return all(verdicts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "unit": self.unit,
            "clients": self.clients,
            "webtier": self.webtier_value,
            "book": self.book.value if self.book else None,
            "ratio": self.ratio,
            "targets": [str(goal) for goal in self.goals],
            "met": self.met,
            "raw_limit": self.raw.value if self.raw else None,
            "raw_ratio": self.raw_ratio,
            "server_us_per_op_webtier": self.webtier.server_us_per_op if self.webtier else None,
            "server_us_per_op_book": self.book.server_us_per_op if self.book else None,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Table:
    """A table of a benchmark's own shape, for figures that are not a
    webtier-vs-book comparison (the Cluster bench's one server vs Cluster).
    ``records`` keep the figures as numbers, for the JSON report."""

    title: str
    columns: tuple[str, ...]
    cells: tuple[tuple[str, ...], ...]
    records: tuple[dict[str, Any], ...] = ()
    right: frozenset[str] = frozenset()  # columns aligned right

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "columns": list(self.columns), "records": list(self.records)}


@dataclass
class Report:
    """A benchmark's results, with what is needed to read them."""

    title: str
    machine: dict[str, str]
    settings: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "machine": self.machine,
            "settings": self.settings,
            "rows": [row.as_dict() for row in self.rows],
            "tables": [table.as_dict() for table in self.tables],
            "measurements": [m.as_dict() for m in self.measurements],
            "notes": self.notes,
        }
