"""The standing fault matrix: every capability under every fault.

Each capability's workload (:mod:`tests.faults.workloads`: sync and asyncio
loads, and its middlewares for the page cache) runs against real servers
while one fault (:mod:`tests.faults.drivers`) strikes; once every load
succeeds again, the capability's invariant is checked against Redis:

* counters, statistics, views: acknowledged <= stored <= acknowledged + unknown;
* sessions and carts: no live session deleted, a rotated token dead, a cart
  holding what was acknowledged last (or a later write of unknown outcome);
* the page cache: never a 500, never a private page from the cache or in it,
  never an item page older than the last invalidation;
* the row cache: no read older than the last invalidation.

Faults of one server strike a server that keeps every acknowledged write on
disk (AOF, fsync always), one capability at a time. The failover kills a
master of a Cluster with replicas, every capability's data on it at once
(a failover takes seconds): there Redis's asynchronous replication may lose
acknowledged writes, which are recorded as figures, not failures; a write
applied twice, a private page shared or a 500 fail there as anywhere.
Recovery times, outcomes and the invariants' figures go to the ``figures``
table (see conftest).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BINARIES
from tests.faults.drivers import STANDALONE_FAULTS, Failover, Fault, Target, serving
from tests.faults.figures import Figures
from tests.faults.harness import Load, tally
from tests.faults.servers import DURABLE, start_server
from tests.faults.workloads import CAPABILITIES, Env, Ranking, Workload
from webtier.testing import RedisCluster

pytestmark = pytest.mark.faults

AFTER = 0.1  # seconds of load after recovery, before it stops


def run(
    capabilities: list[type[Workload]],
    fault: Fault,
    target: Target,
    tmp: Path,
    figures: Figures,
) -> None:
    """The capabilities' workloads under ``fault``; fails on what broke."""
    workloads = []
    for capability in capabilities:
        directory = tmp / capability.capability
        directory.mkdir()
        workloads.append(capability(Env(target.url, directory, target.on_victim)))
    try:
        loaders = {}
        for workload in workloads:
            workload.setup()
            loaders[workload.capability] = workload.loaders()
            if len(workloads) > 1:
                for loader in loaders[workload.capability]:
                    loader.name = f"{workload.capability}/{loader.name}"

        async def asetup() -> None:
            for workload in workloads:
                await workload.asetup()

        async def ateardown() -> None:
            await asyncio.gather(*(workload.ateardown() for workload in workloads))

        load = Load([loader for each in loaders.values() for loader in each], asetup, ateardown)
        with load:
            load.warm()
            try:
                began, lifted = fault.strike(target)
                ended = time.monotonic()
            finally:
                fault.restore(target)  # for a failover: the killed master back, a replica
            recovery = load.recovered(lifted)
            time.sleep(AFTER)
        assert load.errors == [], load.errors
        broken = {}
        for workload in workloads:
            workload.settle()
            verdict = workload.check()
            mine = loaders[workload.capability]
            figures.add(
                capability=workload.capability,
                fault=fault.name,
                recovery={loader.name: recovery[loader.name] for loader in mine},
                outcomes=tally(mine),
                during=tally(mine, (began, ended)),
                invariant=verdict.figures,
                losses=verdict.losses,
                notes=dict(target.notes),
            )
            wrong = verdict.violations + ([] if fault.lossy else verdict.losses)
            if wrong:
                broken[workload.capability] = wrong
        assert broken == {}
    finally:
        for workload in workloads:
            workload.close()


@pytest.mark.parametrize("fault", STANDALONE_FAULTS)
@pytest.mark.parametrize("capability", CAPABILITIES)
def test_a_capability_survives_a_fault_of_its_server(
    capability: str, fault: str, tmp_path: Path, figures: Figures
) -> None:
    with start_server(*DURABLE) as server:
        target = Target(server.url, server)
        run([CAPABILITIES[capability]], STANDALONE_FAULTS[fault], target, tmp_path, figures)


@pytest.fixture(scope="module")
def replicated() -> Iterator[RedisCluster]:
    """3 masters with a replica each, failing over 2 s after a master goes silent."""
    with RedisCluster.start(BINARIES["standalone"], node_timeout=2000) as running:
        yield running


def test_every_capability_survives_a_master_failover(
    replicated: RedisCluster, tmp_path: Path, figures: Figures
) -> None:
    # The master of the ranking's one slot; every other workload puts its
    # data there too.
    route = Ranking.fixed_route(Env(replicated.url, tmp_path, lambda _: True).config())
    assert route is not None
    target = Target(replicated.url, serving(replicated, route), replicated)
    run(list(CAPABILITIES.values()), Failover(), target, tmp_path, figures)
