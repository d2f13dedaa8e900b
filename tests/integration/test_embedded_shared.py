"""The embedded server is shared by the webtier processes of a data
directory and belongs to none of them: real processes join it, leave it,
race to start it and get killed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import redis
from click.testing import CliRunner

from tests.helpers.servers import servers_for, wait_until
from webtier.cli import main
from webtier.embedded import EmbeddedRedis
from webtier.embedded.leases import live_leases
from webtier.embedded.status import server_status


def webtier_command(data_dir: Path, *args: str, output: Path) -> subprocess.Popen[bytes]:
    with output.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "webtier", "--data-dir", str(data_dir), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def user_process(data_dir: Path, body: str, *, join_at: float = 0.0) -> subprocess.Popen[str]:
    """A python process that joins the server (at the wall-clock time
    ``join_at``, if given), runs ``body`` (``server``: its EmbeddedRedis,
    ``client``: a redis client on it), then leaves."""
    script = textwrap.dedent(
        f"""
        import sys, time, redis
        from pathlib import Path
        from webtier.embedded import EmbeddedRedis
        time.sleep(max(0.0, {join_at} - time.time()))
        server = EmbeddedRedis(sys.argv[1]).start()
        client = redis.Redis.from_url(server.url)
        """
    )
    script += textwrap.dedent(body) + "\nclient.close()\nserver.stop()\n"
    return subprocess.Popen(
        [sys.executable, "-c", script, str(data_dir)], stdout=subprocess.PIPE, text=True
    )


def test_the_demo_outlives_the_worker_that_started_the_server(tmp_path: Path) -> None:
    socket_path = tmp_path.resolve() / "redis.sock"
    worker = webtier_command(tmp_path, "worker", output=tmp_path / "worker.out")
    demo = None
    try:
        assert wait_until(lambda: server_status(tmp_path).users == 1, 30)
        demo = webtier_command(
            tmp_path, "demo", "--duration", "8", "--rate", "50", "--port", "0", "--items", "1000",
            output=tmp_path / "demo.out",
        )  # fmt: skip
        assert wait_until(lambda: server_status(tmp_path).users == 2, 30)
        worker.send_signal(signal.SIGTERM)  # the process that started the server
        assert worker.wait(timeout=30) == 0
        assert servers_for(socket_path) != []
        client = redis.Redis.from_url(EmbeddedRedis(tmp_path).url)
        before = int(client.dbsize())
        assert wait_until(lambda: int(client.info("stats")["total_commands_processed"]) > 0)
        commands = int(client.info("stats")["total_commands_processed"])
        assert wait_until(
            lambda: int(client.info("stats")["total_commands_processed"]) > commands + 20
        ), "the demo stopped writing when the worker left"
        client.close()
        assert before > 0
        assert demo.wait(timeout=60) == 0, (tmp_path / "demo.out").read_text()[-3000:]
    finally:
        for process in (worker, demo):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    # The demo was the last to leave: it stopped the server.
    assert wait_until(lambda: servers_for(socket_path) == [])


def test_eight_processes_starting_at_once_start_one_server(tmp_path: Path) -> None:
    go_at = time.time() + 3  # all eight have imported webtier by then
    release = tmp_path / "release"
    body = f"""
        client.incr("joined")
        print(client.info("server")["process_id"], flush=True)
        while not Path({str(release)!r}).exists():
            time.sleep(0.05)
    """
    shared = tmp_path / "shared"
    processes = [user_process(shared, body, join_at=go_at) for _ in range(8)]
    try:
        assert wait_until(lambda: live_leases(shared, reclaim=False) == 8, 60)
        status = server_status(shared)
        assert status.running
        assert status.users == 8
        assert len(servers_for(shared.resolve() / "redis.sock")) == 1
        client = redis.Redis.from_url(EmbeddedRedis(shared).url)
        assert wait_until(lambda: client.get("joined") == b"8")
        client.close()
        release.touch()
        pids = {process.communicate(timeout=60)[0].strip() for process in processes}
        assert pids == {str(status.pid)}
        assert all(process.returncode == 0 for process in processes)
    finally:
        release.touch()
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert wait_until(lambda: servers_for(shared.resolve() / "redis.sock") == [])
    with EmbeddedRedis(shared) as again:  # the data was saved as the last one left
        client = redis.Redis.from_url(again.url)
        assert client.get("joined") == b"8"
        client.close()


def test_the_last_to_leave_stops_the_server_with_its_data_saved(tmp_path: Path) -> None:
    socket_path = tmp_path.resolve() / "redis.sock"
    first = user_process(tmp_path, 'client.set("first", "1")\n')
    with EmbeddedRedis(tmp_path) as second:
        first.communicate(timeout=60)
        assert first.returncode == 0
        assert servers_for(socket_path) != []  # the second is still there
        client = redis.Redis.from_url(second.url)
        assert client.get("first") == b"1"
        client.set("second", "2")  # and at once leave: SHUTDOWN SAVE flushes it
        client.close()
    assert servers_for(socket_path) == []
    assert (tmp_path / "dump.rdb").exists()
    with EmbeddedRedis(tmp_path) as again:
        client = redis.Redis.from_url(again.url)
        assert client.mget("first", "second") == [b"1", b"2"]
        client.close()


def test_a_killed_user_does_not_keep_the_server_forever(tmp_path: Path) -> None:
    socket_path = tmp_path.resolve() / "redis.sock"
    hanging = 'client.set("k", "v")\nprint("in", flush=True)\ntime.sleep(600)\n'
    users = [user_process(tmp_path, hanging) for _ in range(2)]
    try:
        for user in users:
            assert user.stdout is not None
            assert user.stdout.readline() == "in\n"
        os.kill(users[0].pid, signal.SIGKILL)
        users[0].wait()
        time.sleep(1)  # several of the keeper's rounds
        assert servers_for(socket_path) != []  # the other user still holds a lease
        assert server_status(tmp_path).users == 1
        os.kill(users[1].pid, signal.SIGKILL)
        users[1].wait()
        assert wait_until(lambda: servers_for(socket_path) == []), "no one reclaimed the leases"
        assert list((tmp_path / "leases").glob("*.lease")) == []
    finally:
        for user in users:
            if user.poll() is None:
                user.kill()
                user.wait()
            assert user.stdout is not None
            user.stdout.close()
    with EmbeddedRedis(tmp_path) as again:  # saved by the keeper's SHUTDOWN SAVE
        client = redis.Redis.from_url(again.url)
        assert client.get("k") == b"v"
        client.close()


def test_server_status_stop_and_reset_commands(tmp_path: Path) -> None:
    runner = CliRunner()

    def webtier_cli(*args: str, given: str | None = None) -> tuple[int, str]:
        result = runner.invoke(main, ["--data-dir", str(tmp_path), *args], input=given)
        return result.exit_code, result.output

    assert webtier_cli("server", "status") == (1, f"not running (data dir {tmp_path})\n")
    with EmbeddedRedis(tmp_path, port=0) as user:
        client = redis.Redis.from_url(user.url)
        client.set("k", "v")
        code, shown = webtier_cli("server", "status")
        assert code == 0
        assert f"socket: {user.socket_path}" in shown
        assert "tcp: none" in shown
        assert "1 webtier processes" in shown
        assert "memory: " in shown
        code, shown = webtier_cli("reset", given="n\n")
        assert code == 1  # not confirmed: nothing deleted
        assert client.get("k") == b"v"
        assert webtier_cli("reset", given="y\n")[0] == 0
        assert client.get("k") is None
        client.set("k", "v")
        assert webtier_cli("reset", "--yes") == (0, f"deleted 1 keys in {tmp_path}\n")
        client.close()
        assert webtier_cli("server", "stop") == (0, f"stopped; data saved in {tmp_path}\n")
        assert servers_for(user.socket_path) == []
    assert webtier_cli("server", "stop") == (0, f"not running (data dir {tmp_path})\n")


def test_the_server_command_listens_on_tcp_too(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a free port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webtier",
            "--data-dir",
            str(tmp_path),
            "server",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().startswith("started: export WEBTIER_REDIS_URL=unix://")
        tcp = child.stdout.readline()
        assert tcp.startswith("tcp (127.0.0.1 and ::1 only): redis://:")
        assert tcp.endswith(f"@127.0.0.1:{port}/0\n")
        client = redis.Redis.from_url(tcp.split(": ", 1)[1].strip())
        assert client.ping()
        client.close()
        assert server_status(tmp_path).port == port
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        assert child.stdout is not None
        child.stdout.close()
    assert wait_until(lambda: servers_for(tmp_path.resolve() / "redis.sock") == [])


def test_a_forked_child_leaving_keeps_its_parents_lease(tmp_path: Path) -> None:
    # gunicorn --preload: the tier made in the master, its workers forked.
    with EmbeddedRedis(tmp_path) as server:
        child = os.fork()
        if child == 0:  # pragma: no cover - the child
            server.stop()
            os._exit(0)
        assert os.waitpid(child, 0)[1] == 0
        assert servers_for(server.socket_path) != []
        assert live_leases(tmp_path, reclaim=False) == 1
    assert servers_for(tmp_path.resolve() / "redis.sock") == []


def test_a_busy_port_is_said_at_once(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = CliRunner().invoke(
            main, ["--data-dir", str(tmp_path), "server", "--port", str(port)]
        )
        assert time.monotonic() - started < 10  # not the start timeout
    assert result.exit_code == 1
    assert f"Failed listening on port {port}" in result.output
    assert live_leases(tmp_path, reclaim=False) == 0


APP = """
import contextlib, os

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import webtier


@contextlib.asynccontextmanager
async def lifespan(app):
    async with webtier.open_async(data_dir=os.environ["SHOP_DATA"]) as tier:
        app.state.tier = tier
        yield


async def hit(request):
    count = await request.app.state.tier.client.execute("INCR", "hits")
    return PlainTextResponse(f"{os.getpid()} {count}")


app = Starlette(routes=[Route("/", hit)], lifespan=lifespan)
"""


def test_the_workers_of_an_asgi_server_share_one_server(tmp_path: Path) -> None:
    import httpx

    (tmp_path / "shop.py").write_text(APP)
    data_dir = tmp_path / "data"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    uvicorn = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "shop:app", "--app-dir", str(tmp_path),
         "--port", str(port), "--workers", "2", "--log-level", "warning"],
        env={**os.environ, "SHOP_DATA": str(data_dir)},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"

    def hit() -> tuple[int, int] | None:
        try:
            pid, count = httpx.get(url, headers={"connection": "close"}, timeout=5).text.split()
        except (httpx.HTTPError, ValueError):
            return None
        return int(pid), int(count)

    try:
        assert wait_until(lambda: server_status(data_dir).users == 2, 60)
        answered = [answer for answer in (hit() for _ in range(20)) if answer]
        assert answered
        victim = answered[0][0]
        os.kill(victim, signal.SIGKILL)  # whichever started the server
        time.sleep(1)  # the keeper's rounds: it must see the other lease
        after = [answer for answer in (hit() for _ in range(20)) if answer]
        assert after, "the server went with the worker"
        assert max(count for _, count in after) == len(answered) + len(after)
        assert len(servers_for(data_dir.resolve() / "redis.sock")) == 1
        uvicorn.send_signal(signal.SIGINT)
        uvicorn.wait(timeout=30)
    finally:
        if uvicorn.poll() is None:
            uvicorn.kill()
            uvicorn.wait()
    assert wait_until(lambda: servers_for(data_dir.resolve() / "redis.sock") == [])
