"""The Django adapter of the session middleware while Redis is away: a
503 within the middleware's time limit, never Django's 500 page, and back
when Redis is."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

import webtier
from tests.faults.figures import FIGURES
from tests.faults.servers import DURABLE
from tests.helpers.django_shop import django_serving
from tests.helpers.servers import BINARIES
from webtier.config import RetryPolicy
from webtier.testing import RedisCluster, RedisServer

pytestmark = pytest.mark.faults

# -- outages: a 503, never Django's 500 page -------------------------------------------------

RETRY = RetryPolicy(attempts=2, backoff=0.01, backoff_cap=0.05)


def outage_answers(http: httpx.Client, cookie: str) -> dict[str, int]:
    """Status of each kind of request while Redis is away: the page that
    needs no session, reads and writes of the session."""
    return {
        "home": http.get("/home").status_code,
        "me": http.get("/me", headers={"cookie": cookie}).status_code,
        "view": http.post("/view/42", headers={"cookie": cookie}).status_code,
        "cart": http.post("/cart/hat/2", headers={"cookie": cookie}).status_code,
        "login": http.post("/login/ann", headers={"cookie": cookie}).status_code,
        "anonymous write": http.post("/data/theme/dark").status_code,
    }


DOWN = {"home": 200, "me": 503, "view": 503, "cart": 503, "login": 503, "anonymous write": 503}


@pytest.mark.slow  # a Cluster of its own, nodes killed or stopped: CI only
def test_a_django_shop_with_the_whole_cluster_down_answers_503_never_500(prefix: str) -> None:
    with RedisCluster.start(BINARIES["standalone"], replicas=0) as cluster:
        client = webtier.connect(cluster.url, socket_timeout=0.5)
        tier = webtier.WebTier(client, webtier.Config(prefix=prefix, retry=RETRY))
        with django_serving(tier) as base, httpx.Client(base_url=base) as http:
            cookie = http.post("/cart/book/1").headers["set-cookie"].split(";")[0]
            for server in cluster.servers:
                server.kill()
            began = time.monotonic()
            assert outage_answers(http, cookie) == DOWN
            assert time.monotonic() - began < 10
        webtier.disconnect(client)


@pytest.mark.parametrize("fault", ["kill", "sigstop"])
def test_a_django_shop_recovers_when_its_server_comes_back(prefix: str, fault: str) -> None:
    # Killed, the server refuses connections; stopped, it hangs them: the
    # middleware's time limit (1 s an operation) answers 503 in time.
    # Every acknowledged write on disk (appendfsync always): with everysec,
    # Redis may answer a write it has not yet written to its AOF (while an
    # fsync is pending on a busy disk), which a kill -9 then loses.
    with RedisServer.start(BINARIES["standalone"], *DURABLE) as server:
        client = webtier.connect(server.url)  # 5 s socket timeout: only the limit helps
        tier = webtier.WebTier(client, webtier.Config(prefix=prefix))
        with django_serving(tier) as base, httpx.Client(base_url=base, timeout=30) as http:
            cookie = http.post("/cart/book/1").headers["set-cookie"].split(";")[0]
            assert process_of(server) is not None
            if fault == "kill":
                server.kill()
            else:
                os.kill(process_of(server), signal.SIGSTOP)
            try:
                began = time.monotonic()
                me = http.get("/me", headers={"cookie": cookie})
                assert me.status_code == 503
                assert time.monotonic() - began < 1.0 * 2.5  # the read, then the timing record
                assert me.headers["retry-after"] == "5"
                if fault == "kill":  # hung, each answer takes its second: a few will do
                    assert outage_answers(http, cookie) == DOWN
                else:
                    assert http.get("/home").status_code == 200
                    assert http.post("/cart/hat/2", headers={"cookie": cookie}).status_code == 503
            finally:
                if fault == "kill":
                    server.launch()  # its AOF: the session is back
                else:
                    os.kill(process_of(server), signal.SIGCONT)
            lifted = time.monotonic()
            while http.get("/me", headers={"cookie": cookie}).status_code != 200:
                assert time.monotonic() - lifted < 10, "the shop did not recover"
                time.sleep(0.01)
            FIGURES.add(
                capability="django",
                fault="kill-9+restart" if fault == "kill" else "sigstop",
                recovery={"me": time.monotonic() - lifted},
                outcomes={},
                invariant={},
                losses=[],
                notes={},
            )
            assert http.get("/me", headers={"cookie": cookie}).json()["cart"] == {"book": 1}
        webtier.disconnect(client)


def process_of(server: RedisServer) -> int:
    assert server.process is not None
    return server.process.pid
