"""The servers a run is measured on, and what each spent on it.

A setup (one server, or every master of a Cluster) is read with ``INFO``
before and after a run: CPU (``used_cpu_user + used_cpu_sys``, which counts
everything a server does for the run, network system calls included, where
INFO commandstats counts command execution only) and network bytes
(``total_net_input_bytes`` and ``total_net_output_bytes``); and the
command time of INFO commandstats, which leaves out the reading, parsing and
replying that CPU counts, so that the two apart tell the work of the
commands from the cost of their round trips.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any

import redis

from benchmarks._loops import Loop, Workers, run_loop
from benchmarks._server import BenchServer
from webtier.connect import connect

# The bench's own commands, never counted as the workload's.
_PROBES = frozenset({"info", "config", "ping", "cluster"})


@dataclass(frozen=True, slots=True)
class Reading:
    """One server's counters at one instant."""

    cpu_seconds: float
    net_in: int  # bytes received
    net_out: int  # bytes sent
    command_usec: int  # commandstats time of every command but the probes

    def __sub__(self, earlier: Reading) -> Reading:
        return Reading(
            self.cpu_seconds - earlier.cpu_seconds,
            self.net_in - earlier.net_in,
            self.net_out - earlier.net_out,
            self.command_usec - earlier.command_usec,
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
            commands = sum(
                int(figures["usec"])
                for key, figures in info.items()
                if key.startswith("cmdstat_")
                and key.removeprefix("cmdstat_").split("|")[0] not in _PROBES
            )
            net_in, net_out = (
                int(info["total_net_input_bytes"]),
                int(info["total_net_output_bytes"]),
            )
            found.append(Reading(cpu, net_in, net_out, commands))
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
    def command_us_per_op(self) -> float:
        """commandstats µs per operation: the commands' own work."""
        return sum(r.command_usec for r in self.spent) / self.ops if self.ops else 0.0

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


@contextlib.contextmanager
def single_server(server: BenchServer) -> Iterator[Nodes]:
    """The bench's single server as a setup, read through a client of its own
    with a long timeout: a loaded machine can stall a reply for seconds."""
    client: redis.Redis = connect(server.url, socket_timeout=60)  # type: ignore[assignment]
    try:
        yield Nodes("1 server", server.url, (client,), server.flush)
    finally:
        client.close()


class SlowStartWorkers(Workers):
    """Workers given time to set up before a run: a process makes its
    sessions, pages and rows first (hundreds of round trips on a loaded
    machine), and the count of the servers' work starts when the run does."""

    LEAD = 5.0


def setup_workers(processes: Sequence[int]) -> Workers | None:
    """A pool for the largest process count, or None if all runs are in-process."""
    return SlowStartWorkers(max(processes)) if max(processes) > 1 else None
