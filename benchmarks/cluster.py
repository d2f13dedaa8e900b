"""The Cluster benchmark: every capability's hot operation on a 3-master
Redis Cluster and on one server, with the server CPU each costs and how it
falls on the masters.

Setups:

* **1 server** -- the baseline: the bench's single ``redis-server`` (or the
  one at ``--url``). A single server, not a 1-master Cluster, because the
  target compares with what a shop runs before it outgrows one machine, and
  because ``redis-cli --cluster create`` refuses fewer than 3 masters.
* **3-master Cluster** -- ``webtier.testing.RedisCluster`` with no replicas:
  a replica on this machine would share the same cores and add its
  replication work to the masters' CPU, which the single server has no
  counterpart for.

Both run the same workloads (:mod:`benchmarks._cluster_workloads`) through
webtier's public API, with the same client processes, taking turns run by
run. Server CPU is each node's ``used_cpu_user + used_cpu_sys`` (``INFO
cpu``) before and after a run: it counts everything a node spends on the
run, network system calls and Cluster redirections included, where INFO
commandstats would count command execution only. A master's share is its
part of the Cluster's CPU over all runs of a row.

Targets (printed with their verdicts, never enforced): no master above 40 %
of the Cluster's server CPU for any operation or the mix; server CPU per
operation on the Cluster within 1.2x of the single server's.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from benchmarks import _cluster_workloads as workloads
from benchmarks._harness import Harness
from benchmarks._loops import Loop, Workers
from benchmarks._nodes import Nodes, measure_run, setup_workers, single_server
from benchmarks._render import number, times
from benchmarks._results import Measurement, Row, Table
from webtier.testing import RedisCluster

TITLE = "webtier bench cluster"

MASTERS = 3
MAX_SHARE = 0.40  # of the Cluster's server CPU, on any one master
MAX_CPU_RATIO = 1.2  # Cluster CPU per operation over the single server's

COLUMNS = (
    "operation",
    "clients",
    "1 server ops/s",
    "Cluster ops/s",
    "1 server CPU µs/op",
    "Cluster CPU µs/op",
    "CPU Cluster/1 server",
    "commandstats µs/op, 1 server / Cluster",
    "masters' shares",
    "targets",
    "met",
)
RIGHT = frozenset(COLUMNS[1:8])


@dataclass
class Figures:
    """What one operation did on one setup, run by run."""

    rates: list[float]
    cpu_us: list[float]  # server CPU µs per operation, all nodes
    command_us: list[float]  # commandstats µs per operation, all nodes
    node_cpu: list[float]  # CPU seconds per node, summed over the runs

    @property
    def shares(self) -> list[float]:
        total = sum(self.node_cpu)
        return [cpu / total if total else 0.0 for cpu in self.node_cpu]


@contextlib.contextmanager
def _cluster_nodes() -> Iterator[Nodes]:
    cluster = RedisCluster.start(masters=MASTERS, replicas=0)
    clients = tuple(server.client(socket_timeout=60) for server in cluster.servers)
    try:

        def flush() -> None:
            for client in clients:
                client.flushall()

        yield Nodes(f"{MASTERS}-master Cluster", cluster.url, clients, flush)
    finally:
        for client in clients:
            client.close()
        cluster.stop()


def _compare(
    h: Harness,
    what: str,
    workload: Callable[[str], AbstractContextManager[Loop]],
    setups: Sequence[Nodes],
    processes: int,
    workers: Workers | None,
) -> list[Figures]:
    """Each setup's figures, the setups taking turns run by run, each
    emptied before the operation's first run."""
    found = [Figures([], [], [], [0.0] * len(nodes.clients)) for nodes in setups]
    for nodes in setups:
        nodes.flush()
    h.ticker.begin(f"{what}, {processes} process(es)", h.settings.repeat * len(setups))
    for round_number in range(h.settings.repeat):
        for nodes, figures in zip(setups, found, strict=True):
            h.say(f"{what} on {nodes.label}, {processes} process(es), run {round_number + 1}")
            run = measure_run(workload, nodes, processes, h.settings.seconds, workers)
            figures.rates.append(run.rate)
            figures.cpu_us.append(run.cpu_us_per_op)
            figures.command_us.append(run.command_us_per_op)
            figures.node_cpu = [
                total + spent.cpu_seconds
                for total, spent in zip(figures.node_cpu, run.spent, strict=True)
            ]
            h.ticker.tick()
    for nodes, figures in zip(setups, found, strict=True):
        shares = ", ".join(f"{share:.0%}" for share in figures.shares)
        h.record(
            Measurement(
                f"{what}, {nodes.label}",
                processes,
                "ops/s",
                tuple(figures.rates),
                server_us=tuple(figures.command_us),
                cpu_us=tuple(figures.cpu_us),
                note=f"CPU shares by node: {shares}" if len(figures.shares) > 1 else "",
            )
        )
    return found


def _record(what: str, processes: int, single: Figures, cluster: Figures) -> dict[str, Any]:
    single_cpu = statistics.median(single.cpu_us)
    cluster_cpu = statistics.median(cluster.cpu_us)
    ratio = cluster_cpu / single_cpu if single_cpu else None
    top_share = max(cluster.shares)
    return {
        "operation": what,
        "clients": processes,
        "single_ops_per_s": statistics.median(single.rates),
        "cluster_ops_per_s": statistics.median(cluster.rates),
        "single_cpu_us_per_op": single_cpu,
        "cluster_cpu_us_per_op": cluster_cpu,
        "cpu_ratio": ratio,
        "single_command_us_per_op": statistics.median(single.command_us),
        "cluster_command_us_per_op": statistics.median(cluster.command_us),
        "master_shares": cluster.shares,
        "share_met": top_share <= MAX_SHARE,
        "cpu_met": None if ratio is None else ratio <= MAX_CPU_RATIO,
    }


def _cells(record: dict[str, Any]) -> tuple[str, ...]:
    verdicts = [record["share_met"], record["cpu_met"]]
    met = "n/a" if None in verdicts else ("yes" if all(verdicts) else "NO")
    if met == "NO":
        failed = [
            "share" if not record["share_met"] else "",
            "CPU" if not record["cpu_met"] else "",
        ]
        met += f" ({', '.join(f for f in failed if f)})"
    return (
        record["operation"],
        str(record["clients"]),
        number(record["single_ops_per_s"]),
        number(record["cluster_ops_per_s"]),
        number(record["single_cpu_us_per_op"]),
        number(record["cluster_cpu_us_per_op"]),
        times(record["cpu_ratio"]),
        f"{number(record['single_command_us_per_op'])} / "
        f"{number(record['cluster_command_us_per_op'])}",
        " / ".join(f"{share:.0%}" for share in record["master_shares"]),
        f"each ≤{MAX_SHARE:.0%}, ≤{MAX_CPU_RATIO:g}x",
        met,
    )


def run(h: Harness) -> list[Row]:
    """Every operation and the mix, on both setups, at every process count;
    the results go to the harness's tables (this bench has no book rows)."""
    records: list[dict[str, Any]] = []
    with (
        single_server(h.server) as single,
        _cluster_nodes() as cluster,
        contextlib.ExitStack() as stack,
    ):
        workers = setup_workers(h.settings.processes)
        if workers is not None:
            stack.enter_context(contextlib.closing(workers))
        for processes in h.settings.processes:
            pool = workers if processes > 1 else None
            for what, workload in workloads.WORKLOADS.items():
                figures = _compare(h, what, workload, (single, cluster), processes, pool)
                records.append(_record(what, processes, *figures))
        h.server.flush()
    h.tables.append(
        Table(
            f"1 server vs a {MASTERS}-master Cluster (no replicas)",
            COLUMNS,
            tuple(_cells(record) for record in records),
            tuple(records),
            RIGHT,
        )
    )
    h.notes.extend(
        [
            "server CPU: each node's used_cpu_user + used_cpu_sys (INFO cpu) over the run, "
            "network system calls and Cluster housekeeping included, per operation",
            "masters' shares: each master's part of the Cluster's server CPU over all runs",
            "commandstats µs/op: the commands' own execution time (INFO commandstats), "
            "without reading, parsing and replying: CPU minus it is the round trips' cost",
            "ops/s are client-bound on a small machine (Python clients and servers share "
            "its cores): compare CPU µs/op and shares, not rates",
        ]
    )
    return []
