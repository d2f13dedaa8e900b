"""Where webtier's shop spends its CPU: py-spy on its uvicorn worker under
wrk's load, summed by layer.

    python -m benchmarks.shop_profile [--seconds 20] [--items 100000] [--top 5]

Starts the shop bench's webtier stack (one uvicorn worker, uvloop and
httptools, its jobs beside it) on a redis-server of its own, drives it
with wrk replaying the loadgen model's visits (:mod:`benchmarks._wrk`),
and meanwhile samples the worker with ``py-spy record --format raw``
(collapsed stacks; idle samples left out, so the shares are of CPU).
Each sample goes to the layer of its innermost frame that belongs to one
(:data:`LAYERS`): the standard library's frames count for the code that
called them (``hmac`` called by the CSRF guard is the guard's), asyncio's
and the selector's are the event loop's. Prints a Markdown table: each
layer's share and its top frames.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

# (layer, what a frame's file path contains), the first match wins.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bench's own counters", ("/benchmarks/_shop_server.py",)),
    ("HTTP transport (uvicorn, httptools)", ("/uvicorn/", "/httptools/", "/h11/")),
    ("Redis transport (webtier._core, redis-py, hiredis)",
     ("/webtier/_core/", "/redis/", "/hiredis/")),
    ("event loop (asyncio, uvloop)", ("/asyncio/", "/uvloop/", "selectors.py")),
    ("ASGI middleware (webtier.web, the shop's security)",
     ("/webtier/web/", "/webtier/demo/shop/security.py")),
    ("Starlette routing", ("/starlette/", "/anyio/")),
    ("Jinja2", ("/jinja2/", "/markupsafe/", ".html")),
    ("SQLAlchemy", ("/sqlalchemy/", "sqlite3")),
    ("app (the shop, webtier's capabilities)", ("/webtier/",)),
)  # fmt: skip
OTHER = "other"
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


@dataclass(frozen=True, slots=True)
class Frame:
    function: str
    file: str

    @classmethod
    def parse(cls, text: str) -> Frame:
        found = _FRAME.match(text.strip())
        if found is None:
            return cls(text.strip(), "")
        return cls(found["function"], found["file"])

    @property
    def short(self) -> str:
        tail = "/".join(Path(self.file).parts[-2:]) if self.file else "?"
        return f"{self.function} ({tail})"


def _stdlib_paths() -> tuple[str, ...]:
    return tuple({sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib")})


def layer_of(frame: Frame, stdlib: tuple[str, ...] = ()) -> str | None:
    """The frame's layer; None for a standard library frame that is no
    layer's (it counts for its caller)."""
    path = "/" + frame.file  # py-spy's short names ("uvicorn/main.py") match too
    for layer, marks in LAYERS:
        if any(mark in path for mark in marks):
            return layer
    if not frame.file or any(frame.file.startswith(path) for path in stdlib):
        return None
    if "site-packages" not in frame.file and "<" in frame.file:  # <frozen ...>, <template>
        return None
    return OTHER


@dataclass(frozen=True, slots=True)
class Summary:
    samples: int
    layers: dict[str, int]  # layer -> samples
    frames: dict[str, collections.Counter[str]]  # layer -> leaf frame of that layer -> samples


def summarise(lines: Iterable[str], stdlib: tuple[str, ...] = ()) -> Summary:
    """Sum py-spy's collapsed stacks (``frame;frame;...;leaf count``, the
    outermost frame first) by layer: each sample goes to the innermost frame
    that has one."""
    layers: collections.Counter[str] = collections.Counter()
    frames: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    total = 0
    for line in lines:
        stack, _, count_text = line.rstrip("\n").rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        layer, frame = OTHER, Frame("(standard library only)", "")
        for text in reversed(stack.split(";")):
            candidate = Frame.parse(text)
            found = layer_of(candidate, stdlib)
            if found is not None:
                layer, frame = found, candidate
                break
        layers[layer] += count
        frames[layer][frame.short] += count
    return Summary(total, dict(layers), dict(frames))


def markdown(summary: Summary, top: int = 4) -> str:
    """The summary as a Markdown table, the largest layer first."""
    lines = ["| layer | share of CPU samples | top frames (share of all samples) |",
             "|---|---:|---|"]  # fmt: skip
    total = summary.samples or 1
    for layer, samples in sorted(summary.layers.items(), key=lambda item: -item[1]):
        shown = ", ".join(
            f"`{frame}` {100 * n / total:.1f} %"
            for frame, n in summary.frames[layer].most_common(top)
        )
        lines.append(f"| {layer} | {100 * samples / total:.1f} % | {shown} |")
    lines.append(f"\n{summary.samples:,} samples.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from benchmarks import shop
    from benchmarks._wrk import replay, write_visits, wrk_path
    from webtier.demo import shopdb
    from webtier.demo.loadgen import Traffic
    from webtier.testing import RedisServer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=20, help="seconds of load and sampling")
    parser.add_argument("--items", type=int, default=100_000, help="the shop's items")
    parser.add_argument("--connections", type=int, default=32, help="wrk's (one per visitor)")
    parser.add_argument("--rate", type=int, default=250, help="py-spy's samples a second")
    parser.add_argument("--top", type=int, default=4, help="frames shown per layer")
    parser.add_argument("--raw", type=Path, help="also keep py-spy's collapsed stacks here")
    options = parser.parse_args(argv)
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists() or wrk_path() is None:
        sys.exit("needs py-spy (pip install py-spy) and wrk (apt-get install wrk)")
    with tempfile.TemporaryDirectory(prefix="webtier-shop-profile-") as folder:
        database = f"sqlite:///{folder}/shop.db"
        engine = sa.create_engine(database)
        shopdb.create(engine, options.items)
        engine.dispose()
        visits = Path(folder) / "visits"
        traffic = Traffic(items=options.items, users=shop.USERS)
        write_visits(visits, options.connections, traffic, 1, shop.WRK_VISITS)
        raw = options.raw or Path(folder) / "stacks.txt"
        with (
            RedisServer.start() as server,
            shop.running("webtier", server.url, database, options.items) as stack,
        ):
            stack.signal(signal.SIGCONT)
            # Warm up: the rows and pages the load reads cached, as in the bench.
            replay(stack.base, visits, min(10, options.seconds), options.connections)
            pid = stack.processes[0].pid  # one worker: uvicorn serves in this process
            loaded = threading.Thread(
                target=replay,
                args=(stack.base, visits, options.seconds + 4, options.connections),
            )
            loaded.start()
            try:
                subprocess.run(
                    [py_spy, "record", "--format", "raw", "--full-filenames",
                     "--rate", str(options.rate),
                     "--duration", str(options.seconds), "--pid", str(pid),
                     "--output", str(raw), "--nonblocking"],
                    check=True, capture_output=True, timeout=options.seconds + 120,
                )  # fmt: skip
            finally:
                loaded.join()
        with raw.open() as lines:
            summary = summarise(lines, _stdlib_paths())
    load = os.getloadavg()
    print(markdown(summary, options.top))
    print(f"Load average during the run: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}.")


if __name__ == "__main__":
    main()
