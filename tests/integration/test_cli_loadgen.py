"""``webtier loadgen`` as a person runs it: until Ctrl-C, which stops the
visitors warm and prints what the shop answered; and against nothing, where
the refused connections are counted, not raised, and the run exits 1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

from tests.helpers.shop import serving, stocked
from webtier.testing import free_port


def loadgen(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "webtier", "loadgen", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_ctrl_c_stops_warm_and_prints_the_report(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    engine = stocked(sa.create_engine(f"sqlite:///{tmp_path}/shop.db"))
    with serving(redis_url, prefix, engine) as shop:
        running = loadgen(shop, "--rate", "20", "--items", "300", "--seed", "3")
        assert running.stderr is not None
        started = running.stderr.readline()  # said once Ctrl-C stops it warm
        assert started.startswith("loading "), started
        time.sleep(1)  # visiting (however slow the start, the line came after it)
        running.send_signal(signal.SIGINT)
        out, err = running.communicate(timeout=60)
    assert running.returncode == 0, err
    assert "stopping: visitors finish their request" in err
    assert "requests/s" in out
    assert "GET /item/{item_id}" in out
    assert "Traceback" not in err


def test_a_run_of_visitors_sends_that_many_and_ends_when_they_leave(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    engine = stocked(sa.create_engine(f"sqlite:///{tmp_path}/shop.db"))
    with serving(redis_url, prefix, engine) as shop:
        running = loadgen(
            shop, "--visitors", "25", "--rate", "200", "--concurrency", "3", "--items", "300",
            "--seed", "4", "--json",
        )  # fmt: skip
        out, err = running.communicate(timeout=120)
    assert running.returncode == 0, err
    assert "25 visitors" in err
    document = json.loads(out)
    assert document["visitors"] == 25
    # Arrivals faster than three visitors can be served: most waited, and
    # none was cut short (a visit ends on a page, never on a transport error).
    assert document["waited_for_a_slot"] > 0
    assert document["statuses"]["5xx"] == document["transport_errors"] == 0
    assert document["requests"] >= 25


def test_a_shop_that_is_not_there_is_counted_and_fails_the_run() -> None:
    target = f"http://127.0.0.1:{free_port()}"
    running = loadgen(target, "--visitors", "3", "--rate", "50", "--json")
    out, err = running.communicate(timeout=60)
    document = json.loads(out)  # the report still comes, as evidence
    assert document["requests"] == document["transport_errors"] > 0
    assert document["visitors"] == 3
    assert running.returncode == 1, err
    assert err.splitlines()[-1] == (
        f"error: every request failed: {document['transport_errors']:,} transport errors, "
        f"no answer from {target} (is the shop running there?)"
    )
