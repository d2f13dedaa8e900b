"""The embedded server keeps its doors shut and comes back when killed: its
TCP port on loopback only, behind a password, open while asked for; a
redis-server or keeper killed with ``kill -9`` restarted with its data, and
``webtier server`` saying what happened."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.helpers.servers import servers_for, wait_until
from webtier.embedded import EmbeddedRedis
from webtier.embedded.keeper import PID_FILE
from webtier.embedded.password import password_path
from webtier.embedded.status import server_status
from webtier.errors import EmbeddedServerError
from webtier.testing.redis_servers import free_port


class ServerCommand:
    """``webtier server [--port N]`` as a child process, its stderr in a file."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.errors = data_dir.parent / f"{data_dir.name}-server.err"
        with self.errors.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "webtier", "--data-dir", str(data_dir), "server", *args],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        assert self.process.stdout is not None
        self.first_lines = [self.process.stdout.readline() for _ in range(1 + bool(args))]

    def said(self) -> str:
        return self.errors.read_text()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "redis"
    assert wait_until(lambda: servers_for(tmp_path.resolve() / "redis" / "redis.sock") == [], 30)


def other_addresses() -> list[str]:
    """This machine's addresses that are not loopback (maybe none)."""
    found = set()
    try:
        for *_, address in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            found.add(str(address[0]))
    except OSError:
        pass
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.254.254.254", 1))  # no packet is sent: picks the route's source
            found.add(probe.getsockname()[0])
        except OSError:
            pass
    return sorted(a for a in found if not a.startswith("127."))


def refused(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return True
    return False


def test_joining_with_a_port_listens_on_loopback_only_with_a_password(data_dir: Path) -> None:
    port = free_port()
    with EmbeddedRedis(data_dir) as user:  # the server runs, no TCP: the case of the report
        command = ServerCommand(data_dir, "--port", str(port))
        try:
            assert command.first_lines[0].startswith("already running: export WEBTIER_REDIS_URL=")
            assert command.first_lines[1].startswith("tcp (127.0.0.1 and ::1 only): redis://:")
            admin = redis.Redis.from_url(user.url, decode_responses=True)
            assert admin.config_get("port") == {"port": str(port)}
            assert set(admin.config_get("bind")["bind"].split()) <= {"127.0.0.1", "-::1"}
            for address in other_addresses():
                assert refused(address, port), f"redis-server answers on {address}:{port}"
            with pytest.raises(redis.AuthenticationError):  # NOAUTH: the password is needed
                redis.Redis(port=port, socket_timeout=5).ping()
            tcp_url = command.first_lines[1].split(": ", 1)[1].strip()
            assert redis.Redis.from_url(tcp_url).ping()
            mode = stat.S_IMODE(password_path(user.data_dir).stat().st_mode)
            assert mode == 0o600, oct(mode)
            shown = server_status(data_dir)
            assert shown.port == port
            assert f"tcp: 127.0.0.1:{port}" in "\n".join(shown.lines())
        finally:
            command.close()
        assert command.process.returncode == 0, command.said()
        # webtier server opened the port: leaving, it closed it; the server stays.
        assert admin.config_get("port") == {"port": "0"}
        assert refused("127.0.0.1", port)
        admin.close()
    assert "started" not in command.said()


def test_a_port_left_by_a_killed_command_closes(data_dir: Path) -> None:
    port = free_port()
    with EmbeddedRedis(data_dir):
        command = ServerCommand(data_dir, "--port", str(port))
        try:
            assert not refused("127.0.0.1", port)
            command.process.kill()  # no goodbye: the keeper sees its lease go
            command.process.wait()
            assert wait_until(lambda: refused("127.0.0.1", port), 30)
        finally:
            command.close()


def test_a_second_port_is_refused_while_the_first_is_wanted(data_dir: Path) -> None:
    with EmbeddedRedis(data_dir, port=free_port()) as first:
        with pytest.raises(EmbeddedServerError, match=f"listens on TCP port {first.port}"):
            EmbeddedRedis(data_dir, port=free_port()).start()
        assert not refused("127.0.0.1", first.port)


def test_the_unix_socket_needs_the_password_too(data_dir: Path) -> None:
    with EmbeddedRedis(data_dir) as server:
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(unix_socket_path=str(server.socket_path)).ping()
        assert server.password
        assert server.password in server.url


def test_a_killed_server_is_restarted_with_its_data(data_dir: Path) -> None:
    command = ServerCommand(data_dir)
    try:
        url = command.first_lines[0].split("=", 1)[1].strip()
        client = redis.Redis.from_url(url)
        client.set("kept", "yes")  # in the append-only file before the reply
        pid = int(client.info("server")["process_id"])
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: "restarted" in command.said(), 30), command.said()
        assert f"pid {pid} was killed by SIGKILL" in command.said()
        assert "was stopped" not in command.said()
        assert client.get("kept") == b"yes"
        assert int(client.info("server")["process_id"]) != pid
        assert command.process.poll() is None  # still on duty
        shown = "\n".join(server_status(data_dir).lines())
        assert f"after pid {pid} was killed by SIGKILL" in shown
        client.close()
    finally:
        command.close()
    assert command.process.returncode == 0


def test_a_killed_keeper_is_replaced_with_its_server(data_dir: Path) -> None:
    command = ServerCommand(data_dir)
    try:
        url = command.first_lines[0].split("=", 1)[1].strip()
        client = redis.Redis.from_url(url)
        client.set("kept", "yes")
        keeper = int((data_dir / PID_FILE).read_text())
        os.kill(keeper, signal.SIGKILL)
        assert wait_until(lambda: "started again" in command.said(), 30), command.said()
        assert "keeper died" in command.said()
        assert client.get("kept") == b"yes"
        assert int((data_dir / PID_FILE).read_text()) != keeper
        client.close()
    finally:
        command.close()
    assert command.process.returncode == 0


def test_a_server_stopped_on_purpose_is_reported_as_such(data_dir: Path) -> None:
    command = ServerCommand(data_dir)
    try:
        stopped = subprocess.run(
            [sys.executable, "-m", "webtier", "--data-dir", str(data_dir), "server", "stop"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert stopped.stdout.startswith("stopped")
        assert command.process.wait(timeout=30) == 0
        assert "the server was stopped" in command.said()
        assert not server_status(data_dir).running
    finally:
        command.close()
