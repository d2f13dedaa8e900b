"""What a durable write costs: an asyncio counter increment on a Sentinel
deployment's master (webtier's own client), alone and followed by
``client.replicated(1)`` (``WAIT`` on a connection of its own, after a
``PUBLISH`` barrier), side by side in one run: rounds of each in turn, so
the machine's load falls on both alike. Prints the medians of the
wall-clock latency and of the client's CPU time per write, and their
ratios::

    python -m benchmarks.durable [--writes 300] [--rounds 5]

Never a test: nothing is asserted (docs/reliability.md has the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import webtier
from webtier.testing import RedisSentinel


async def _round(tier: Any, client: Any, writes: int, durable: bool) -> list[tuple[float, float]]:
    spent = []
    for _ in range(writes):
        wall, cpu = time.perf_counter(), time.process_time()
        await tier.counters.record("durable-bench")
        if durable:
            await client.replicated(1, 1.0)
        spent.append((time.perf_counter() - wall, time.process_time() - cpu))
    return spent


async def _measure(url: str, writes: int, rounds: int) -> dict[bool, list[tuple[float, float]]]:
    found: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    async with webtier.open_async(url, config=webtier.Config(prefix="durable-bench")) as tier:
        await _round(tier, tier.client, 50, True)  # warm: connections, scripts
        for _ in range(rounds):
            for durable in (False, True):
                found[durable] += await _round(tier, tier.client, writes, durable)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=300, help="writes a round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each, in turn")
    args = parser.parse_args()
    with RedisSentinel.start() as deployment:
        found = asyncio.run(_measure(deployment.url, args.writes, args.rounds))
    medians = {
        durable: (
            statistics.median(w for w, _ in spent) * 1e6,
            statistics.median(c for _, c in spent) * 1e6,
        )
        for durable, spent in found.items()
    }
    print(f"{'asyncio counter increment':<34} {'latency µs':>11} {'client CPU µs':>14}")
    for durable, label in ((False, "alone"), (True, "+ replicated(1)")):
        wall, cpu = medians[durable]
        print(f"{label:<34} {wall:>11.0f} {cpu:>14.0f}")
    ratio_wall = medians[True][0] / medians[False][0]
    ratio_cpu = medians[True][1] / medians[False][1]
    print(f"{'ratio':<34} {ratio_wall:>10.2f}x {ratio_cpu:>13.2f}x")
    print(f"({args.rounds} rounds of {args.writes} writes each, medians)")


if __name__ == "__main__":
    main()
