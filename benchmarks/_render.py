"""A report as rich tables for the terminal, as Markdown for the docs, or as
JSON. The cells are built once and shared by the renderers."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks._results import Measurement, Report, Row

SUMMARY_COLUMNS = (
    "benchmark",
    "clients",
    "unit",
    "webtier",
    "book",
    "webtier/book",
    "target",
    "met",
    "raw limit",
    "webtier/raw",
    "server µs/op webtier",
    "server µs/op book",
)
DETAIL_COLUMNS = (
    "measurement",
    "clients",
    "unit",
    "median",
    "min",
    "max",
    "runs",
    "server µs/op (commandstats)",
    "server CPU µs/op",
    "note",
)
_RIGHT = {"clients", "webtier", "book", "webtier/book", "raw limit", "webtier/raw", "median"}
_RIGHT |= {"min", "max", "runs", "server µs/op webtier", "server µs/op book"}
_RIGHT |= {"server µs/op (commandstats)", "server CPU µs/op"}


def number(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def times(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}x" if value >= 100 else f"{value:.2f}x"


def summary_cells(row: Row) -> list[str]:
    met = {None: "", True: "yes", False: "NO"}[row.met]
    return [
        row.what,
        "" if row.clients is None else str(row.clients),
        row.unit,
        number(row.webtier_value),
        number(row.book.value if row.book else None),
        times(row.ratio),
        " and ".join(str(goal) for goal in row.goals),
        met,
        number(row.raw.value if row.raw else None),
        times(row.raw_ratio),
        number(row.webtier.server_us_per_op if row.webtier else None),
        number(row.book.server_us_per_op if row.book else None),
    ]


def detail_cells(m: Measurement) -> list[str]:
    return [
        m.name,
        str(m.clients),
        m.unit,
        number(m.value),
        number(min(m.values)),
        number(max(m.values)),
        str(len(m.values)),
        number(m.server_us_per_op),
        number(m.cpu_us_per_op),
        m.note,
    ]


def _table(
    title: str,
    columns: tuple[str, ...],
    rows: list[list[str]] | tuple[tuple[str, ...], ...],
    right: frozenset[str] | set[str] = _RIGHT,
) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left")
    for cells in rows:
        table.add_row(*cells)
    return table


def machine_line(report: Report) -> str:
    return "; ".join(f"{key}: {value}" for key, value in report.machine.items())


def notes(report: Report) -> list[str]:
    """The rows' notes (once each), then the report's."""
    found: dict[str, None] = {}
    for row in report.rows:
        if row.note:
            found[f"{row.what}: {row.note}"] = None
    return [*found, *report.notes]


def print_rich(report: Report, console: Console) -> None:
    console.print(f"[bold]{report.title}[/]")
    console.print(machine_line(report), style="dim")
    if report.rows:
        console.print(_table("summary", SUMMARY_COLUMNS, [summary_cells(r) for r in report.rows]))
    for own in report.tables:
        console.print(_table(own.title, own.columns, own.cells, own.right))
    for note in notes(report):
        console.print(f"- {note}", style="dim")
    details = [detail_cells(m) for m in report.measurements]
    console.print(_table("measurements", DETAIL_COLUMNS, details))


def _markdown_table(
    columns: tuple[str, ...],
    rows: list[list[str]] | tuple[tuple[str, ...], ...],
    right: frozenset[str] | set[str] = _RIGHT,
) -> str:
    def line(cells: list[str] | tuple[str, ...]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    rule = ["---:" if c in right else "---" for c in columns]
    return "\n".join([line(columns), line(rule), *(line(cells) for cells in rows)])


def markdown(report: Report) -> str:
    settings = ", ".join(f"{k}={v}" for k, v in report.settings.items())
    parts = [
        f"### {report.title}",
        f"Machine: {machine_line(report)}.  \nSettings: {settings}.",
    ]
    if report.rows:
        parts.append(_markdown_table(SUMMARY_COLUMNS, [summary_cells(r) for r in report.rows]))
    parts.extend(
        f"**{own.title}**\n\n" + _markdown_table(own.columns, own.cells, own.right)
        for own in report.tables
    )
    if notes(report):
        parts.append("\n".join(f"- {note}" for note in notes(report)))
    parts.append(_markdown_table(DETAIL_COLUMNS, [detail_cells(m) for m in report.measurements]))
    return "\n\n".join(parts) + "\n"


def write_json(report: Report, path: Path) -> None:
    path.write_text(json.dumps(report.as_dict(), indent=2, ensure_ascii=False) + "\n")
