"""The demo shop through a Sentinel failover: served by uvicorn on a
``redis+sentinel://`` URL (a master, two replicas, three sentinels failing
it over 1 s after it goes silent), browsed by visitors who look at items,
put them in their carts, look at the cart and check out, while the master
is killed (SIGKILL).

The failover window is bounded by events, not by a clock: it opens at the
kill and closes when the first cart write that began after the kill is
answered (the first write on the new master: the old one is dead). A
request still in flight then (begun before the window closed) is inside
it too: that is the margin. Every 5xx (and every request that got no
answer) lies inside the window; after it, each visitor goes on for a fixed
number of rounds, every one served with a 2xx or a redirect."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.faults.figures import Figures
from tests.helpers.servers import BINARIES
from tests.helpers.shop import CHECKOUT_KEY, ITEMS, TOKEN, browser, post, serving, stocked, token
from webtier.testing import RedisSentinel

pytestmark = [pytest.mark.faults, pytest.mark.slow]

VISITORS = 4
WARM_ROUNDS = 5  # rounds each visitor makes before the kill
AFTER_ROUNDS = 15  # rounds each visitor makes once the window has closed


@pytest.fixture(scope="module")
def deployment() -> Iterator[RedisSentinel]:
    with RedisSentinel.start(BINARIES["standalone"], down_after_ms=1000) as running:
        yield running


@dataclass
class Answer:
    began: float
    ended: float
    request: str
    status: int  # 0: no answer (the connection failed or timed out)
    write: bool = False


@dataclass
class Visitor:
    """A browser in a thread: an item page, the item put in the cart, the
    cart page, and every third round a checkout."""

    base: str
    seed: int
    answers: list[Answer] = field(default_factory=list)
    rounds: int = 0
    error: BaseException | None = None

    def fetch(self, client: httpx.Client, method: str, path: str, **data: str) -> httpx.Response:
        began = time.monotonic()
        try:
            answer = client.request(method, path, data=data or None)
        except httpx.HTTPError:
            self.answers.append(Answer(began, time.monotonic(), f"{method} {path}", 0))
            raise
        write = method == "POST" and path == "/cart" and answer.status_code == 303
        self.answers.append(
            Answer(began, time.monotonic(), f"{method} {path}", answer.status_code, write)
        )
        return answer

    def run(self, stop: threading.Event) -> None:
        rng = random.Random(self.seed)
        try:
            with httpx.Client(base_url=self.base, timeout=30) as client:
                while not stop.is_set():
                    with contextlib.suppress(httpx.HTTPError):  # recorded as status 0
                        self.round(client, rng)
                    self.rounds += 1
        except BaseException as error:  # reported by the test
            self.error = error

    def round(self, client: httpx.Client, rng: random.Random) -> None:
        item = rng.randint(1, ITEMS)
        page = self.fetch(client, "GET", f"/item/{item}")
        token = TOKEN.search(page.text)
        if page.status_code != 200 or token is None:
            return
        self.fetch(client, "POST", "/cart", csrftoken=token.group(1), item=str(item), count="1")
        cart = self.fetch(client, "GET", "/cart")
        if self.rounds % 3 != 2:
            return
        token, key = TOKEN.search(cart.text), CHECKOUT_KEY.search(cart.text)
        if cart.status_code == 200 and token and key and key.group(1):
            self.fetch(client, "POST", "/checkout", csrftoken=token.group(1), checkout=key.group(1))


def wait(condition: object, what: str, timeout: float = 120) -> None:
    """Until ``condition()`` holds; a guard against a hang, not a timing
    assertion (the visitors make a fixed number of rounds)."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} within {timeout:.0f} s"
        time.sleep(0.02)


def test_the_shop_serves_through_a_failover(
    deployment: RedisSentinel, tmp_path: Path, figures: Figures
) -> None:
    engine = stocked(sa.create_engine(f"sqlite:///{tmp_path}/shop.db"))
    prefix = f"shopfo{int(time.time() * 1000) % 10**8}"
    victim = deployment.current_master()
    stop = threading.Event()
    try:
        with serving(deployment.url, prefix, engine) as base:
            visitors = [Visitor(base, seed) for seed in range(VISITORS)]
            threads = [threading.Thread(target=v.run, args=(stop,)) for v in visitors]
            for thread in threads:
                thread.start()
            try:
                wait(lambda: all(v.rounds >= WARM_ROUNDS for v in visitors), "the warm-up")
                killed = time.monotonic()
                victim.kill()

                def first_write() -> float | None:
                    ends = [
                        a.ended
                        for v in visitors
                        for a in list(v.answers)
                        if a.write and a.began >= killed
                    ]
                    return min(ends, default=None)

                wait(lambda: first_write() is not None, "a cart written on the new master")
                closed = first_write()
                assert closed is not None
                after = {id(v): v.rounds + AFTER_ROUNDS for v in visitors}
                wait(
                    lambda: all(v.rounds >= after[id(v)] for v in visitors),
                    "the rounds after the failover",
                )
            finally:
                stop.set()
                for thread in threads:
                    thread.join(60)
    finally:
        deployment.restore(victim)
    for visitor in visitors:
        assert visitor.error is None, visitor.error
    answers = [a for v in visitors for a in v.answers]
    failed = [a for a in answers if a.status >= 500 or a.status == 0]
    outside = [a for a in failed if a.began >= closed]
    served_after = [a for a in answers if a.began >= closed]
    statuses: dict[int, int] = {}
    for a in answers:
        statuses[a.status] = statuses.get(a.status, 0) + 1
    print(
        f"\nshop through a failover: {len(answers)} requests, statuses {sorted(statuses.items())}; "
        "window (kill to the first cart written on the new master) "
        f"{(closed - killed) * 1000:.0f} ms; "
        f"{len(failed)} failed inside it, {len(outside)} after; "
        f"{len(served_after)} requests after it"
    )
    figures.add(
        capability="shop-sentinel",
        fault="sentinel failover",
        recovery={"cart write": closed - killed},
        outcomes={str(k): v for k, v in sorted(statuses.items())},
    )
    assert not outside, [(a.request, a.status, a.began - closed) for a in outside]
    # Every request begun after the window closed was served.
    assert all(200 <= a.status < 400 for a in served_after), [
        (a.request, a.status) for a in served_after if not 200 <= a.status < 400
    ]
    assert len(served_after) >= VISITORS * AFTER_ROUNDS


def test_durable_cart_changes(deployment: RedisSentinel, tmp_path: Path) -> None:
    # ShopSettings(durable=1): a cart change answers once a replica holds it;
    # with the replicas stopped, none does in time: a 503, and the same form
    # sent again once they are back is taken (setting a count repeats safely).
    engine = stocked(sa.create_engine(f"sqlite:///{tmp_path}/shop.db"))
    prefix = f"shopdu{int(time.time() * 1000) % 10**8}"
    replicas = [s for s in deployment.servers if s is not deployment.current_master()]
    with serving(deployment.url, prefix, engine, durable=1) as base, browser(base) as client:
        assert post(client, "/item/7", "/cart", item="7", count="1").status_code == 303
        form = {"csrftoken": token(client.get("/item/7")), "item": "7", "count": "2"}
        for replica in replicas:
            assert replica.process is not None
            os.kill(replica.process.pid, signal.SIGSTOP)
        try:
            refused = client.post("/cart", data=form)
        finally:
            for replica in replicas:
                assert replica.process is not None
                os.kill(replica.process.pid, signal.SIGCONT)
        assert refused.status_code == 503, refused.text
        assert "retry-after" in refused.headers
        assert client.post("/cart", data=form).status_code == 303
        assert "7: 2 in your cart" in client.get("/cart").text
    deployment.wait_healthy()
