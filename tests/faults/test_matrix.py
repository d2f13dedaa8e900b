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

from pathlib import Path

import pytest

from tests.faults.drivers import STANDALONE_FAULTS, Failover, Target, serving
from tests.faults.figures import Figures
from tests.faults.runner import run
from tests.faults.servers import DURABLE, start_server
from tests.faults.workloads import CAPABILITIES, Env, Ranking
from webtier.testing import RedisCluster

pytestmark = [pytest.mark.faults, pytest.mark.slow]  # loads under faults: CI, not the quick run


@pytest.mark.parametrize("fault", STANDALONE_FAULTS)
@pytest.mark.parametrize("capability", CAPABILITIES)
def test_a_capability_survives_a_fault_of_its_server(
    capability: str, fault: str, tmp_path: Path, figures: Figures
) -> None:
    with start_server(*DURABLE) as server:
        target = Target(server.url, server)
        run([CAPABILITIES[capability]], STANDALONE_FAULTS[fault], target, tmp_path, figures)


def test_every_capability_survives_a_master_failover(
    replicated: RedisCluster, tmp_path: Path, figures: Figures
) -> None:
    # The master of the ranking's one slot; every other workload puts its
    # data there too.
    route = Ranking.fixed_route(Env(replicated.url, tmp_path, lambda _: True).config())
    assert route is not None
    target = Target(replicated.url, serving(replicated, route), replicated)
    run(list(CAPABILITIES.values()), Failover(), target, tmp_path, figures)
