"""The machine a benchmark ran on: figures mean little without it."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def describe(redis_version: str, redis_benchmark: str | None) -> dict[str, str]:
    """CPUs, CPU model, Redis and client versions, in display order."""
    return {
        "CPUs": str(os.cpu_count()),
        "CPU": _cpu_model(),
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "redis-py": _version("redis"),
        "hiredis": _version("hiredis"),
        "Redis server": redis_version,
        "redis-benchmark": redis_benchmark or "not found",
    }
