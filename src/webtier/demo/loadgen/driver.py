"""The load generator's I/O: visitors of :mod:`~webtier.demo.loadgen.model`
sent to a running shop over HTTP with one shared ``httpx.AsyncClient``.

Visitors arrive at ``rate`` a second; at most ``concurrency`` are inside at
once: an arrival beyond that waits for one to leave (and is counted), so
the generator's memory and connections stay bounded however slow the shop
is. Stopping (``duration`` over, or ``stop`` set) lets each visitor finish
the request it is in and start no other, so every checkout the shop
answered is counted; whatever still hangs after ``grace`` seconds is
cancelled, and a checkout cut off that way is reported as such.

A run of ``visitors`` is a fixed amount of work instead: that many arrive,
and each goes through its whole visit however slow the shop is, so what
the run did depends on the seed and not on the machine's speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import re
import time
from collections.abc import Mapping
from http.cookiejar import Cookie, CookieJar, DefaultCookiePolicy
from typing import Any

from webtier._core.extras import extra_needed
from webtier.demo.loadgen.browser import absorb_cookies, cookie_header, form_token
from webtier.demo.loadgen.model import Returning, Step, Traffic, Visitor, Zipf
from webtier.demo.loadgen.report import LoadReport, Recorder, route_of
from webtier.errors import InvalidInput

with extra_needed("shop", "the load generator"):
    import httpx

_ORDER = re.compile(r"/orders/(\d+)$")
log = logging.getLogger("webtier.loadgen")


class _VisitOver(Exception):
    """The visit cannot go on: the run is stopping, or the shop is unreachable."""


class _KeepNothing(DefaultCookiePolicy):
    """The shared client's own cookie jar stores nothing: each visitor keeps
    its cookies (:class:`Visitor`), which the shared jar would mix up."""

    def set_ok(self, cookie: Cookie, request: object) -> bool:
        return False


class _Visit:
    """One visitor going through its plan, one request at a time."""

    def __init__(
        self, http: httpx.AsyncClient, visitor: Visitor, recorder: Recorder, stopping: asyncio.Event
    ) -> None:
        self.http, self.visitor, self.recorder, self.stopping = http, visitor, recorder, stopping
        self.page = ""  # the HTML of the page the visitor is on

    async def request(
        self, method: str, path: str, form: Mapping[str, str | int] | None = None
    ) -> httpx.Response:
        if self.stopping.is_set():
            raise _VisitOver
        route = route_of(method, path)
        started = time.perf_counter()
        headers = cookie_header(self.visitor.cookies)
        try:
            try:
                response = await self.http.request(method, path, data=form, headers=headers)
            except (httpx.RemoteProtocolError, httpx.ReadError) as error:
                if method != "GET":
                    raise
                # The server closed a kept-alive connection as this request
                # went out on it (uvicorn's keep-alive timer can fire before
                # the request is read when its loop was busy past it): a
                # browser sends a GET again, on a new one. Logged: a long
                # wait before it says the server's loop was held up.
                log.warning(
                    "loadgen: %s %s: connection closed after %.1f s (%r); sent again",
                    method,
                    path,
                    time.perf_counter() - started,
                    error,
                )
                response = await self.http.request(method, path, headers=headers)
        except httpx.HTTPError as error:
            log.warning(
                "loadgen: %s %s: no answer after %.1f s: %r",
                method,
                path,
                time.perf_counter() - started,
                error,
            )
            self.recorder.transport_error(route)
            raise _VisitOver from error
        self.recorder.response(route, response.status_code, time.perf_counter() - started)
        absorb_cookies(self.visitor.cookies, response.headers.get_list("set-cookie"))
        return response

    async def open(self, path: str) -> httpx.Response:
        """GET a page and stay on it."""
        response = await self.request("GET", path)
        self.page = response.text
        return response

    async def submit(self, path: str, fields: dict[str, str | int], *, from_page: str) -> str:
        """POST the form of the page the visitor is on that posts to ``path``
        (if it has none, of ``from_page``) with its CSRF token, then follow a
        303 as a browser does. Returns the redirect's path; ``""`` when not
        redirected, or when neither page had the form (a session the shop
        ended meanwhile shows none): a browser has nothing to submit then."""
        token = form_token(self.page, path)
        if token is None:
            await self.open(from_page)
            token = form_token(self.page, path)
            if token is None:
                return ""
        response = await self.request("POST", path, {**fields, "csrftoken": token})
        if response.status_code != 303:
            self.page = response.text
            return ""
        target = httpx.URL(response.headers.get("location", "/"))
        await self.open(target.raw_path.decode("ascii"))
        return target.path

    async def checkout(self) -> None:
        await self.open("/cart")
        token = form_token(self.page, "/checkout")
        if token is None:
            return  # no checkout form: the cart was emptied (its session ended)
        try:
            response = await self.request("POST", "/checkout", {"csrftoken": token})
        except asyncio.CancelledError:
            # Cut off while the shop may be writing the order: report it, as
            # the order may exist without being counted as acknowledged.
            self.recorder.checkouts_cut_off += 1
            raise
        if response.status_code == 409:
            self.recorder.out_of_stock += 1
        ordered = _ORDER.search(httpx.URL(response.headers.get("location", "")).path)
        if response.status_code == 303 and ordered:
            self.recorder.checkout(int(ordered.group(1)))
            await self.open(ordered.group(0))
        else:
            self.page = response.text

    async def step(self, step: Step) -> None:
        action = step.action
        if action == "home":
            await self.open("/")
        elif action == "item":
            await self.open(f"/item/{step.item}")
        elif action == "cart":
            await self.open("/cart")
        elif action == "flash":
            await self.open("/flash-sale")
        elif action == "account":
            await self.open("/account")
        elif action == "add":
            fields: dict[str, str | int] = {"item": step.item or 1, "count": step.count or 1}
            await self.submit("/cart", fields, from_page=f"/item/{step.item}")
        elif action == "login":
            await self.open("/login")
            landed = await self.submit("/login", {"username": step.user or ""}, from_page="/login")
            self.visitor.logged_in = self.visitor.logged_in or bool(landed)
        elif action == "checkout":
            await self.checkout()
        elif action == "logout":
            landed = await self.submit("/logout", {}, from_page="/account")
            self.visitor.logged_in = self.visitor.logged_in and not landed


async def drive(
    base_url: str,
    *,
    rate: float,
    duration: float | None,
    users: int,
    visitors: int | None = None,
    seed: int | None = None,
    stop: asyncio.Event | None = None,
    items: int | None = None,
    concurrency: int = 64,
    traffic: Traffic | None = None,
    timeout: float = 10.0,
    grace: float = 15.0,
) -> LoadReport:
    """Send the shop at ``base_url`` visitors arriving at ``rate`` a second
    until ``duration`` seconds have passed (``None``: until ``stop`` is set)
    and report what it answered. With ``visitors``: until that many have
    arrived and finished their visits (or ``duration`` or ``stop`` ends it).

    ``users``: the pool of usernames visitors log in with; ``items``: the
    shop's item count (ids 1..items; default: ``traffic``'s, 100,000);
    ``seed`` makes the visitors' choices repeatable; ``concurrency``: the
    most visitors inside at once; ``timeout``: seconds a request may take;
    ``grace``: seconds left to visitors to finish at the stop. Does not
    check where ``base_url`` points: see :func:`check_target`.
    """
    if not rate > 0 or rate == float("inf"):
        raise InvalidInput("rate", "must be a finite number of visitors a second > 0", rate)
    if concurrency < 1:
        raise InvalidInput("concurrency", "must be >= 1", concurrency)
    if visitors is not None and visitors < 1:
        raise InvalidInput("visitors", "must be >= 1", visitors)
    traffic = dataclasses.replace(
        traffic or Traffic(), users=users, items=items or (traffic or Traffic()).items
    )
    stop = stop or asyncio.Event()
    rng = random.Random(seed)
    zipf = Zipf(traffic.items, traffic.zipf_s)
    recorder, returning = Recorder(), Returning()
    loop = asyncio.get_running_loop()
    began = loop.time()
    # Set when the run ends, by ``stop`` or at the end of ``duration``.
    over = asyncio.Event()
    # Set when no one else arrives: the run is over, or ``visitors`` came.
    arrived = asyncio.Event()
    relay_arrivals = asyncio.create_task(_relay(over, arrived))
    relay = asyncio.create_task(_relay(stop, over))
    timer = None if duration is None else loop.call_at(began + duration, over.set)
    slots = asyncio.Semaphore(concurrency)
    visits: set[asyncio.Task[None]] = set()

    async def visit(visitor: Visitor, plan: list[Step]) -> None:
        try:
            walk = _Visit(client, visitor, recorder, over)
            for step in plan:
                await walk.step(step)
            returning.leave(visitor, traffic, rng)
        except _VisitOver:
            pass
        finally:
            slots.release()

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    try:
        async with httpx.AsyncClient(
            base_url=base_url,
            limits=limits,
            timeout=timeout,
            cookies=CookieJar(policy=_KeepNothing()),
            follow_redirects=False,
        ) as client:
            arrival = began
            while not await _sleep_or_over(arrived, arrival - loop.time()):
                if slots.locked():
                    recorder.waited_for_a_slot += 1
                    if not await _acquire_or_over(slots, arrived):
                        break
                    arrival = loop.time()  # no burst to catch up after the wait
                else:
                    await slots.acquire()
                visitor = returning.arrive(traffic, rng)
                recorder.visitors += 1
                recorder.returning_visitors += bool(visitor.cookies)
                plan = traffic.plan(
                    random.Random(rng.getrandbits(64)), zipf, logged_in=visitor.logged_in
                )
                task = asyncio.create_task(visit(visitor, plan))
                visits.add(task)
                task.add_done_callback(visits.discard)
                arrival += traffic.gap(rng, rate)
                if recorder.visitors == visitors:
                    arrived.set()
            if visitors is not None and visits:
                # A fixed amount of work: every visit goes to its end.
                await _wait_or_over(set(visits), over)
            over.set()
            if visits:
                _, late = await asyncio.wait(set(visits), timeout=grace)
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)
    finally:
        relay.cancel()
        relay_arrivals.cancel()
        if timer is not None:
            timer.cancel()
    return recorder.report(loop.time() - began)


async def _relay(stop: asyncio.Event, over: asyncio.Event) -> None:
    await stop.wait()
    over.set()


async def _wait_or_over(tasks: set[asyncio.Task[None]], over: asyncio.Event) -> None:
    """Wait for ``tasks`` to end, or for the run to be over."""
    ending: asyncio.Future[Any] = asyncio.ensure_future(over.wait())
    pending: set[asyncio.Future[Any]] = set(tasks)
    try:
        while pending and not over.is_set():
            _, pending = await asyncio.wait({*pending, ending}, return_when=asyncio.FIRST_COMPLETED)
            pending.discard(ending)
    finally:
        ending.cancel()


async def _sleep_or_over(over: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds``; True if the run is over (before or meanwhile)."""
    if seconds > 0 and not over.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(over.wait(), seconds)
    return over.is_set()


async def _acquire_or_over(slots: asyncio.Semaphore, over: asyncio.Event) -> bool:
    """Take a slot once a visitor leaves; False if the run ends first."""
    acquiring = asyncio.ensure_future(slots.acquire())
    ending = asyncio.ensure_future(over.wait())
    await asyncio.wait({acquiring, ending}, return_when=asyncio.FIRST_COMPLETED)
    ending.cancel()
    if not acquiring.done():
        acquiring.cancel()
        return False
    if over.is_set():
        slots.release()
        return False
    return True
