"""What the fault tests measured, collected over a run: one row per fault
survived (a capability under a fault), with its recovery time, the outcomes
its loads saw and the invariant's figures. Written as JSON for
docs/reliability.md; never a reason for a test to fail."""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any


class Figures:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def add(self, **row: Any) -> None:
        with self._lock:
            self.rows.append(row)

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "faults.json"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        path.write_text(json.dumps({"written": stamp, "rows": self.rows}, indent=1, default=str))
        return path

    def table(self) -> list[str]:
        """Recovery per capability and fault (ms: median / max over its loads)."""
        cells: dict[tuple[str, str], list[float]] = defaultdict(list)
        counts: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for row in self.rows:
            key = (row.get("capability", "-"), row.get("fault", "-"))
            cells[key].extend(row.get("recovery", {}).values())
            for name, value in row.get("outcomes", {}).items():
                counts[key][name] += value
        lines = [f"{'capability':<12} {'fault':<24} {'recovery ms (median / max)':<28} outcomes"]
        for (capability, fault), seconds in sorted(cells.items()):
            if seconds:
                shown = f"{statistics.median(seconds) * 1000:.0f} / {max(seconds) * 1000:.0f}"
            else:
                shown = "-"
            tally = ", ".join(f"{k} {v}" for k, v in sorted(counts[(capability, fault)].items()))
            lines.append(f"{capability:<12} {fault:<24} {shown:<28} {tally}")
        return lines


FIGURES = Figures()


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The matrix as docs/reliability.md shows it: per capability and fault,
    steps run, what they were told, recovery (ms, median / max of its loads)."""
    faults = ["kill-9+restart", "sigstop", "pause-write", "pause-all", "client-kill", "failover"]
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        fault = row.get("fault", "")
        if fault not in faults or not row.get("recovery") or not row.get("outcomes"):
            continue
        seconds = list(row["recovery"].values())
        outcomes = row.get("outcomes", {})
        cells[(row["capability"], fault)] = {
            "steps": sum(outcomes.values()),
            "unknown": outcomes.get("unknown", 0) + outcomes.get("partial", 0),
            "failed": outcomes.get("unavailable", 0),
            "recovery": (statistics.median(seconds) * 1000, max(seconds) * 1000),
        }
    lines = ["| capability | " + " | ".join(faults) + " |", "|---" * (len(faults) + 1) + "|"]
    for capability in sorted({c for c, _ in cells}):
        shown = []
        for fault in faults:
            cell = cells.get((capability, fault))
            if cell is None:
                shown.append("-")
                continue
            median, most = cell["recovery"]
            shown.append(
                f"{median:.0f} / {most:.0f} ms ({cell['steps']} steps, "
                f"{cell['failed']} failed, {cell['unknown']} unknown)"
            )
        lines.append(f"| {capability} | " + " | ".join(shown) + " |")
    return lines


if __name__ == "__main__":  # python -m tests.faults.figures .pytest_figures/faults.json
    import sys

    print("\n".join(markdown(json.loads(Path(sys.argv[1]).read_text())["rows"])))
