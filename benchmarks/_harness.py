"""The benchmark harness: settings, and a :class:`Harness` that measures.

A benchmark module (``counters.py`` and its siblings) is a function of a
harness that returns comparison rows; the harness owns the server, the
worker processes, the repetitions and the server-side accounting:

* :meth:`Harness.loops` -- ops/s of workloads run for ``seconds`` in 1 or N
  processes, ``repeat`` times, interleaved so that a noisy neighbour hurts
  every side alike; with server µs per operation from ``INFO commandstats``
  and server CPU from ``INFO cpu``.
* :meth:`Harness.passes` -- rate of a one-shot job (a cleanup pass) over
  freshly prepared data, ``repeat`` times.
* :meth:`Harness.raw` -- the real ``redis-benchmark`` sending a command.
* :meth:`Harness.memory` -- ``used_memory`` growth per item of a data set.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import redis

from benchmarks._loops import Workers, Workload, run_loop
from benchmarks._machine import describe
from benchmarks._redis_benchmark import (
    RedisBenchmark,
    Unsupported,
    connection_args,
    find_redis_benchmark,
)
from benchmarks._results import Measurement, Report, Table
from benchmarks._server import BenchServer, open_server
from webtier._core.protocol import Arg
from webtier.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Settings:
    """How long and how often to measure."""

    seconds: float = 2.0  # per timed run
    repeat: int = 3  # runs per figure; the median is reported
    processes: tuple[int, ...] = (1, 4)  # client processes (redis-benchmark: connections)
    scale: float = 1.0  # data set sizes are multiplied by this (< 1 for a smoke run)

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise ConfigError("seconds must be > 0")
        if self.repeat < 1:
            raise ConfigError("repeat must be >= 1")
        if not self.processes or min(self.processes) < 1:
            raise ConfigError("processes must be a list of numbers >= 1, e.g. 1,4")
        if not self.scale > 0:
            raise ConfigError("scale must be > 0")

    def size(self, full: int) -> int:
        """A data set size scaled by :attr:`scale`."""
        return max(1, round(full * self.scale))


@dataclass(frozen=True, slots=True)
class Contender:
    """One side of a loop comparison: a workload and the commands its client
    sends (counted in commandstats; ``None``: all but the bench's probes)."""

    name: str
    workload: Workload
    commands: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class Pass:
    """One side of a pass comparison: a job over a data set that ``prepare``
    builds afresh before each timed pass; the job returns how many items it
    handled."""

    name: str
    prepare: Callable[[], object]
    job: Callable[[], int]
    commands: frozenset[str] | None = None


class Ticker:
    """Told how many timed runs a measurement has and when each ends (a
    progress bar draws them); this one ignores it."""

    def begin(self, what: str, runs: int) -> None:
        return None

    def tick(self) -> None:
        return None


class Harness:
    """Measures workloads against one server; collects every measurement."""

    def __init__(
        self,
        settings: Settings,
        server: BenchServer,
        say: Callable[[str], object],
        ticker: Ticker | None = None,
    ) -> None:
        self.settings = settings
        self.server = server
        self.say = say
        self.ticker = ticker or Ticker()
        # Read now: after a Ctrl-C the report is made with the server gone.
        self.server_version = server.version
        self.measurements: list[Measurement] = []
        self.notes: list[str] = []
        self.tables: list[Table] = []  # a benchmark's own tables, beside its rows
        self._workers: Workers | None = None
        self.redis_benchmark = find_redis_benchmark(server.server_binary)

    @classmethod
    @contextlib.contextmanager
    def open(
        cls,
        settings: Settings,
        url: str | None,
        say: Callable[[str], object],
        ticker: Ticker | None = None,
    ) -> Iterator[Harness]:
        """A harness on the server at ``url``, or on a redis-server of its own;
        the server it started and the worker processes are gone on exit."""
        with open_server(url) as server:
            harness = cls(settings, server, say, ticker)
            try:
                yield harness
            finally:
                harness.close()

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()
            self._workers = None

    def report(self, title: str) -> Report:
        """A report of every measurement so far (rows are the caller's)."""
        version = None
        if self.redis_benchmark:
            version = RedisBenchmark(self.redis_benchmark, []).version()
        s = self.settings
        settings = {
            "seconds": s.seconds,
            "repeat": s.repeat,
            "processes": ",".join(map(str, s.processes)),
            "scale": s.scale,
        }
        return Report(
            title,
            describe(self.server_version, version),
            settings,
            measurements=list(self.measurements),
            notes=list(self.notes),
            tables=list(self.tables),
        )

    def record(self, measurement: Measurement) -> Measurement:
        """Keep a measurement made outside the harness's own loops."""
        return self._record(measurement)

    def _record(self, measurement: Measurement) -> Measurement:
        self.measurements.append(measurement)
        return measurement

    def _pool(self, processes: int) -> Workers | None:
        if processes == 1:
            return None
        if self._workers is None:
            self._workers = Workers(max(self.settings.processes))
        return self._workers

    # -- measuring ------------------------------------------------------------------

    def loops(
        self, contenders: Sequence[Contender], processes: int, unit: str = "ops/s"
    ) -> list[Measurement]:
        """Each contender's ops/s in ``processes`` processes; the contenders
        take turns, ``repeat`` rounds of one run each."""
        rates: list[list[float]] = [[] for _ in contenders]
        server_us: list[list[float]] = [[] for _ in contenders]
        cpu_us: list[list[float]] = [[] for _ in contenders]
        names = ", ".join(c.name for c in contenders)
        runs_in_all = self.settings.repeat * len(contenders)
        self.ticker.begin(f"{names}, {processes} process(es)", runs_in_all)
        for round_number in range(self.settings.repeat):
            for i, contender in enumerate(contenders):
                self.say(
                    f"{contender.name}, {processes} process(es), "
                    f"run {round_number + 1}/{self.settings.repeat}"
                )
                runs = run_loop(
                    contender.workload,
                    processes,
                    self.settings.seconds,
                    self._pool(processes),
                    self.server.reset_stats,
                )
                usage = self.server.usage(contender.commands)
                ops = sum(run.ops for run in runs)
                rates[i].append(sum(run.rate for run in runs))
                server_us[i].append(usage.usec / ops if ops else 0.0)
                cpu_us[i].append(usage.cpu_seconds * 1e6 / ops if ops else 0.0)
                self.ticker.tick()
        return [
            self._record(Measurement(c.name, processes, unit, tuple(r), tuple(us), tuple(cpu)))
            for c, r, us, cpu in zip(contenders, rates, server_us, cpu_us, strict=True)
        ]

    def passes(self, contenders: Sequence[Pass], unit: str) -> list[Measurement]:
        """Each contender's rate: its ``job`` (which returns how many items it
        handled) after an untimed ``prepare()``; the contenders take turns,
        ``repeat`` rounds of one pass each, so drift of a shared machine
        falls on both sides alike."""
        runs: list[list[tuple[float, float, float, str]]] = [[] for _ in contenders]
        names = ", ".join(c.name for c in contenders)
        self.ticker.begin(names, self.settings.repeat * len(contenders))
        for round_number in range(self.settings.repeat):
            for i, contender in enumerate(contenders):
                self.say(
                    f"{contender.name}: preparing, run {round_number + 1}/{self.settings.repeat}"
                )
                contender.prepare()
                self.server.reset_stats()
                started = time.perf_counter()
                items = contender.job()
                elapsed = time.perf_counter() - started
                usage = self.server.usage(contender.commands)
                runs[i].append(
                    (
                        items / elapsed,
                        usage.usec / items if items else 0.0,
                        usage.cpu_seconds * 1e6 / items if items else 0.0,
                        f"{items:,} in {elapsed:.2f} s",
                    )
                )
                self.ticker.tick()
        measurements = []
        for contender, found in zip(contenders, runs, strict=True):
            rates, server_us, cpu_us, notes = zip(*found, strict=True)
            measurement = Measurement(
                contender.name, 1, unit, rates, server_us, cpu_us, "; ".join(notes)
            )
            measurements.append(self._record(measurement))
        return measurements

    def raw(
        self,
        name: str,
        mix: Sequence[tuple[Sequence[Arg], float]],
        clients: int,
        client: redis.Redis,
        pipeline: int = 1,
        note: str = "",
    ) -> Measurement | None:
        """Logical operations per second that ``redis-benchmark`` reaches, with
        ``clients`` connections to ``client``'s server and database.

        ``mix`` lists ``(command, commands per operation)``: each command is
        benchmarked alone and an operation costs the weighted sum of their
        times. ``None`` (and a note) when redis-benchmark is not available."""
        if self.redis_benchmark is None:
            self._note_once("raw limit n/a: no redis-benchmark beside redis-server nor on PATH")
            return None
        try:
            tool = RedisBenchmark(self.redis_benchmark, connection_args(client))
        except Unsupported as why:
            self._note_once(f"raw limit n/a: {why}")
            return None
        rates = []
        self.ticker.begin(f"{name}, {clients} client(s)", self.settings.repeat)
        for round_number in range(self.settings.repeat):
            self.say(f"{name}, {clients} client(s), run {round_number + 1}/{self.settings.repeat}")
            seconds_per_op = sum(
                weight / tool.rate(command, clients, self.settings.seconds / len(mix), pipeline)
                for command, weight in mix
            )
            rates.append(1 / seconds_per_op)
            self.ticker.tick()
        return self._record(Measurement(name, clients, "ops/s", tuple(rates), note=note))

    def memory(
        self, name: str, load: Callable[[], object], count: Callable[[], int], unit: str
    ) -> Measurement:
        """``used_memory`` growth per item while ``load()`` stores a data set in
        emptied databases; ``count()``, run after the reading, says how many
        items the server holds (so the reading excludes the counting's buffers)."""
        self.say(f"{name}: loading")
        self.server.flush()
        before = self.settled_memory()
        load()
        grown = self.settled_memory() - before
        items = count()
        note = f"{grown:,} bytes for {items:,}"
        return self._record(Measurement(name, 1, unit, (grown / items,), note=note))

    def settled_memory(self) -> int:
        """``used_memory`` once the server has freed what closed clients held."""
        # A moment for the server to free what a client that just closed held
        # (its buffers): it notices the close on a later turn of its loop.
        time.sleep(0.2)
        return self.server.used_memory()

    def _note_once(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)
