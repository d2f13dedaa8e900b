"""A planned Sentinel failover (``SENTINEL FAILOVER``) under a write load:
asyncio tasks recording a counter through webtier's own client, on a
master with two replicas and three sentinels. Each run asks a sentinel to
fail the master over and times, from then: the first write sent and
acknowledged on the new master, the longest time with no write
acknowledged anywhere (a stall), and the writes refused. ``--stale`` lists
first in the URL a sentinel that names a replica as the master (a sentinel
behind the others; :class:`webtier.testing.StaleSentinel`)::

    python -m benchmarks.sentinel_failover [--runs 10] [--tasks 4] [--stale]

Never a test: nothing is asserted (docs/reliability.md has the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import webtier
from webtier.testing import RedisSentinel, StaleSentinel

_GIVE_UP = 60.0  # seconds without a write on the new master: the run is reported as such
_AFTER = 1.0  # seconds of writes on the new master before a run ends
_WARM = 20.0  # seconds for the first 200 writes; fewer: the run says so, and fails over anyway


@dataclass
class Run:
    first_on_new: float | None = None  # s from the failover asked
    longest_stall: float = 0.0  # s without a write acknowledged, after the failover asked
    refused: int = 0
    warmed: bool = False  # 200 writes acknowledged before the failover
    acked: int = 0
    landed: list[tuple[float, int]] = field(default_factory=list)  # (when, port) acknowledged


async def _writer(tier: webtier.AsyncWebTier, run: Run, stop: asyncio.Event) -> None:
    client: Any = tier.client  # webtier's own, on a Sentinel URL
    master = client.server
    while not stop.is_set():
        before = master.settings.port
        try:
            await tier.counters.record("hits")
        except webtier.RedisUnavailable:
            run.refused += 1
            await asyncio.sleep(0.001)
            continue
        run.acked += 1
        if master.settings.port == before:  # sent and acknowledged on one server
            run.landed.append((time.monotonic(), before))


async def _one(url: str, deployment: RedisSentinel, tasks: int, prefix: str) -> Run:
    run = Run()
    old = deployment.current_master().port
    asker = deployment.sentinels[-1]
    stop = asyncio.Event()
    async with webtier.open_async(url, config=webtier.Config(prefix=prefix)) as tier:
        writers = [asyncio.create_task(_writer(tier, run, stop)) for _ in range(tasks)]
        warming = time.monotonic()
        while run.acked < 200 and time.monotonic() - warming < _WARM:
            await asyncio.sleep(0.01)
        run.warmed = run.acked >= 200
        asked = time.monotonic()
        with contextlib.closing(deployment.sentinel_client(asker, socket_timeout=5)) as client:
            await asyncio.to_thread(
                client.execute_command, "SENTINEL", "FAILOVER", deployment.service
            )
        while time.monotonic() - asked < _GIVE_UP:
            new = [t for t, port in list(run.landed) if t > asked and port != old]
            if new and time.monotonic() - new[0] > _AFTER:
                run.first_on_new = new[0] - asked
                break
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.gather(*writers)
        stopped = time.monotonic()
    ends = [asked, *sorted(t for t, _ in run.landed if t > asked), stopped]
    run.longest_stall = max((b - a for a, b in itertools.pairwise(ends)), default=0.0)
    return run


def _ms(seconds: float | None) -> str:
    return "none in 60 s" if seconds is None else f"{seconds * 1000:,.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=4, help="writing tasks")
    parser.add_argument("--stale", action="store_true", help="a stale sentinel listed first")
    args = parser.parse_args()
    runs: list[Run] = []
    with RedisSentinel.start(down_after_ms=1000) as deployment, contextlib.ExitStack() as stack:
        url = deployment.url
        if args.stale:
            url = stack.enter_context(StaleSentinel.start(deployment)).url
        for index in range(args.runs):
            run = asyncio.run(_one(url, deployment, args.tasks, f"fo{index}{time.time_ns()}"))
            runs.append(run)
            print(
                f"run {index + 1}: first write on the new master {_ms(run.first_on_new)}, "
                f"longest stall {_ms(run.longest_stall)}, refused {run.refused}, "
                f"acknowledged {run.acked}" + ("" if run.warmed else " (200 not reached before)"),
                flush=True,
            )
            deployment.wait_healthy()
    firsts = [r.first_on_new for r in runs]
    stalls = [r.longest_stall for r in runs]
    done = [f for f in firsts if f is not None]
    print(f"{len(runs)} runs, {args.tasks} tasks, stale sentinel first: {args.stale}")
    if done:
        print(
            f"first write on the new master: median {_ms(statistics.median(done))}, "
            f"max {_ms(max(done))}; runs with none in 60 s: {len(firsts) - len(done)}"
        )
    print(f"longest stall: median {_ms(statistics.median(stalls))}, max {_ms(max(stalls))}")
    print(f"writes refused: {sorted(r.refused for r in runs)}")


if __name__ == "__main__":
    main()
