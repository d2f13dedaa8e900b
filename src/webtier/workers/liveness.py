"""Worker liveness: a key with a TTL per worker, and an index to list them.

A worker that dies without cleaning up disappears from the listing once its
key expires (three heartbeats later); the index entry is pruned on the next
heartbeat of any worker, or ignored by readers meanwhile. The index itself
expires as long after the last heartbeat as its entries are kept, so no
worker's leftovers outlive the workers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from webtier._core.protocol import Op, read, text, write
from webtier.config import Config

DEAD_KEPT_MS = 86_400_000  # how long past its TTL a dead worker's index entry may stay


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    id: str
    host: str
    pid: int
    started: float  # seconds since the epoch
    jobs: tuple[str, ...]
    beat: float  # last heartbeat, seconds since the epoch
    last_job: str = ""  # the job of the last step run ("": none yet)
    last_step: float = 0.0  # when it ended, seconds since the epoch
    last_outcome: str = ""  # its summary line, or the error it raised


def heartbeat(cfg: Config, info: WorkerInfo, ttl: float) -> Op[None]:
    keys = cfg.keys
    ttl_ms = int(ttl * 1000)
    value = json.dumps(
        {"id": info.id, "host": info.host, "pid": info.pid, "started": info.started,
         "jobs": list(info.jobs), "beat": info.beat, "last_job": info.last_job,
         "last_step": info.last_step, "last_outcome": info.last_outcome}
    )  # fmt: skip
    beat_ms = int(info.beat * 1000)
    # Entries a day older than their TTL belong to workers long dead.
    kept_ms = ttl_ms + DEAD_KEPT_MS
    yield write(
        keys.workers_route,
        ("SET", keys.worker(info.id), value, "PX", ttl_ms),
        ("ZADD", keys.workers, beat_ms, info.id),
        ("ZREMRANGEBYSCORE", keys.workers, "-inf", beat_ms - kept_ms),
        ("PEXPIRE", keys.workers, kept_ms),
        idempotent=True,
    )


def retire(cfg: Config, worker_id: str) -> Op[None]:
    keys = cfg.keys
    yield write(
        keys.workers_route,
        ("DEL", keys.worker(worker_id)),
        ("ZREM", keys.workers, worker_id),
        idempotent=True,
    )


def alive(cfg: Config) -> Op[list[WorkerInfo]]:
    """Workers whose liveness key has not expired."""
    keys = cfg.keys
    (ids,) = yield read(keys.workers_route, ("ZRANGE", keys.workers, 0, -1))
    if not ids:
        return []
    (values,) = yield read(keys.workers_route, ("MGET", *(keys.worker(text(i)) for i in ids)))
    found = []
    for value in values:
        if value is not None:
            data: dict[str, Any] = json.loads(value)
            found.append(WorkerInfo(**{**data, "jobs": tuple(data["jobs"])}))
    return found
