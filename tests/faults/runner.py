"""Runs capabilities' workloads under a fault: the one procedure of every
fault test (see test_matrix.py)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.faults.drivers import Fault, Target
from tests.faults.figures import Figures
from tests.faults.harness import Load, tally
from tests.faults.workloads import Env, Workload

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
