"""Every address a command prints answers, requested exactly as printed.

A user copies what the terminal shows: ``webtier demo``'s shop, dashboard
and metrics, ``webtier dashboard``'s page, ``webtier server``'s Redis URLs.
The URLs are parsed from the program's own output, so a new line printed
with an address is checked too.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import redis

from tests.helpers.cli import fresh_machine, read_until

PRINTED_URL = re.compile(r"\b(?:https?|redis|unix)://[^\s'\"]+")


def printed_urls(text: str) -> list[str]:
    return [url.rstrip(".,;)") for url in PRINTED_URL.findall(text)]


def check_answers(url: str) -> None:
    """``url`` answers as its scheme says: an HTTP page 200 once its
    redirects are followed (as a browser does), a Redis URL a PING."""
    if url.startswith("http"):
        page = _get(url)
        assert page.status_code == 200, f"{url}: {page.status_code}"
        return
    client = redis.Redis.from_url(url, socket_timeout=10)
    try:
        assert client.ping(), url
    finally:
        client.close()


def _get(url: str) -> httpx.Response:
    # `webtier dashboard` says its address just before uvicorn listens on it
    for _ in range(300):
        try:
            return httpx.get(url, timeout=10, follow_redirects=True)
        except httpx.ConnectError:
            time.sleep(0.1)
    pytest.fail(f"{url}: nothing listening after 30 s")


@contextmanager
def running(*args: str, until: str, tmp_path: Path) -> Iterator[str]:
    """``webtier *args`` running until the end of the block (then Ctrl-C),
    yielding what it printed up to and including the line with ``until``."""
    program = subprocess.Popen(
        [sys.executable, "-m", "webtier", *args],
        env=fresh_machine(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    shown: list[str] = []
    try:
        read_until(program, re.compile(re.escape(until)), shown)
        yield "".join(shown)
        program.send_signal(signal.SIGINT)
        rest, _ = program.communicate(timeout=60)
        assert program.returncode == 0, "".join(shown) + rest
    finally:
        if program.poll() is None:
            program.kill()
            program.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_every_address_the_demo_prints_answers(redis_url: str, prefix: str, tmp_path: Path) -> None:
    with running(
        "--url", redis_url, "--prefix", prefix, "--database", f"sqlite:///{tmp_path}/shop.db",
        "demo", "--port", "0", "--items", "20", "--no-traffic",
        until="metrics", tmp_path=tmp_path,
    ) as output:  # fmt: skip
        urls = printed_urls(output)
        assert len(urls) == 3, output  # the shop, its dashboard, its metrics
        assert any(url.endswith("/dashboard") for url in urls), output
        for url in urls:
            check_answers(url)


def test_the_address_webtier_dashboard_prints_answers(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    port = str(free_port())
    with running(
        "--url", redis_url, "--prefix", prefix, "dashboard", "--port", port,
        until="dashboard on", tmp_path=tmp_path,
    ) as output:  # fmt: skip
        urls = printed_urls(output)
        assert urls, output
        for url in urls:
            check_answers(url)


def test_the_addresses_webtier_server_prints_answer(tmp_path: Path) -> None:
    port = str(free_port())
    with running(
        "--data-dir", str(tmp_path / "data"), "server", "--port", port,
        until="redis://", tmp_path=tmp_path,
    ) as output:  # fmt: skip
        urls = printed_urls(output)
        assert len(urls) == 2, output  # its unix socket, its TCP port
        for url in urls:
            check_answers(url)
