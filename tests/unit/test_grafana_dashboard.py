"""docs/grafana/webtier.json is valid JSON whose panel queries name only
metrics the exposition has (their sample names, as Prometheus stores them);
docs/metrics.md names the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

from webtier import metrics
from webtier.overview import CounterPage, Health
from webtier.stats.histogram import Histogram
from webtier.types import RowStatus, SessionStats, Summary
from webtier.workers.liveness import WorkerInfo

DOCS = Path(__file__).resolve().parents[2] / "docs"
METRIC = re.compile(r"\bwebtier_[a-z_]+")


def exposed() -> set[str]:
    """Every sample name of a snapshot with something in each family."""
    page = CounterPage(60, 1, 0, {"views:/": [(0, 1)]}, [])
    histogram = Histogram.of([0.01, 0.2], 25)
    summary = Summary("/", "AccessTime", 0, 1, 2, 0.21, 0.0, 0.01, 0.2, 0, histogram)
    health = Health(
        SessionStats(1, 1, 1.0, 2.0),
        10,
        {"inventory": RowStatus(1, 0, 0, 0.5)},
        [WorkerInfo("w", "h", 1, 0.0, ("rows",), 1.0)],
        [("item1", 3.0)],
    )
    snapshot = metrics.Snapshot(100.0, 60, page, page, [summary], health)
    return {s.name for family in metrics.families(snapshot) for s in family.samples}


def test_the_grafana_dashboard_queries_real_metrics() -> None:
    document = json.loads((DOCS / "grafana" / "webtier.json").read_text("utf-8"))
    names = exposed()
    queries = [t["expr"] for p in document["panels"] for t in p["targets"]]
    queries += [v["definition"] for v in document["templating"]["list"] if "definition" in v]
    assert len(document["panels"]) >= 10
    for query in queries:
        for name in METRIC.findall(query):
            assert name in names, (name, query)


def test_the_metrics_page_names_real_metrics() -> None:
    names = exposed()
    text = (DOCS / "metrics.md").read_text("utf-8")
    named = set(METRIC.findall(text)) - {"webtier_dashboard"}
    assert named, "docs/metrics.md names no metric"
    families = {re.sub(r"_(bucket|sum|count|total)$", "", n) for n in names}
    for name in named:
        assert name in names or name in families, name
