"""The servers a run is measured on, and what each spent on it.

A setup (one server, or every master of a Cluster) is read with ``INFO``
before and after a run: CPU (``used_cpu_user + used_cpu_sys``, which counts
everything a server does for the run, network system calls included, where
INFO commandstats counts command execution only) and network bytes
(``total_net_input_bytes`` and ``total_net_output_bytes``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any

import redis

from benchmarks._loops import Loop, Workers, run_loop


@dataclass(frozen=True, slots=True)
class Reading:
    """One server's counters at one instant."""

    cpu_seconds: float
    net_in: int  # bytes received
    net_out: int  # bytes sent

    def __sub__(self, earlier: Reading) -> Reading:
        return Reading(
            self.cpu_seconds - earlier.cpu_seconds,
            self.net_in - earlier.net_in,
            self.net_out - earlier.net_out,
        )


@dataclass(frozen=True, slots=True)
class Nodes:
    """The servers of one setup (the single server, or each master of a
    Cluster), with the URL clients use and how to empty them."""

    label: str
    url: str
    clients: tuple[redis.Redis, ...]
    flush: Callable[[], object]

    def read(self) -> list[Reading]:
        found = []
        for client in self.clients:
            info: dict[str, Any] = client.info("all")
            cpu = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
            found.append(
                Reading(
                    cpu, int(info["total_net_input_bytes"]), int(info["total_net_output_bytes"])
                )
            )
        return found


@dataclass(frozen=True, slots=True)
class RunFigures:
    """What one timed run did, and what each node spent on it."""

    ops: int
    rate: float  # operations per second, all processes
    spent: tuple[Reading, ...]  # per node

    @property
    def cpu_us_per_op(self) -> float:
        return sum(r.cpu_seconds for r in self.spent) * 1e6 / self.ops if self.ops else 0.0

    @property
    def bytes_in_per_op(self) -> float:
        return sum(r.net_in for r in self.spent) / self.ops if self.ops else 0.0

    @property
    def bytes_out_per_op(self) -> float:
        return sum(r.net_out for r in self.spent) / self.ops if self.ops else 0.0


def measure_run(
    workload: Callable[[str], AbstractContextManager[Loop]],
    nodes: Nodes,
    processes: int,
    seconds: float,
    workers: Workers | None,
) -> RunFigures:
    """Run ``workload`` on ``nodes`` in ``processes`` processes for
    ``seconds``, reading the nodes just before the start and after the end."""
    before: list[Reading] = []
    runs = run_loop(
        partial(workload, nodes.url),
        processes,
        seconds,
        workers,
        lambda: before.extend(nodes.read()),
    )
    spent = tuple(after - start for after, start in zip(nodes.read(), before, strict=True))
    return RunFigures(sum(run.ops for run in runs), sum(run.rate for run in runs), spent)


class SlowStartWorkers(Workers):
    """Workers given time to set up before a run: a process makes its
    sessions, pages and rows first (hundreds of round trips on a loaded
    machine), and the count of the servers' work starts when the run does."""

    LEAD = 3.0


def setup_workers(processes: Sequence[int]) -> Workers | None:
    """A pool for the largest process count, or None if all runs are in-process."""
    return SlowStartWorkers(max(processes)) if max(processes) > 1 else None
