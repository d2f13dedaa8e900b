"""Driving operations: :func:`drive` (an operation, a web flow or the
wire's exchange, fed replies by hand, with no server), :func:`run_op` (on a
tier's own transport), :class:`InThread` (the sync facade, awaitable, so one
async test body covers both APIs), and steps made up for tests."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Generator, Iterable
from typing import Any, NamedTuple

import anyio

from webtier._core.facade import Part
from webtier._core.protocol import Call, Op, write
from webtier.config import Config
from webtier.types import JobStep
from webtier.workers import Job


class Driven(NamedTuple):
    value: Any  # what the generator returned
    steps: list[Any]  # every step it yielded (each one answered), in order


def drive(
    gen: Generator[Any, Any, Any],
    answers: Iterable[Any] | Callable[[Any], Any] = (),
    *,
    started: bool = False,
    run_calls: bool = False,
) -> Driven:
    """Run the generator ``gen`` -- an operation, a web flow, the wire's
    exchange -- to its end, answering each step it yields by hand, and return
    what it returned and the steps it took (``value, steps = drive(...)``).

    ``answers`` answer the steps in turn: a value is sent in, an exception
    is thrown in, and a callable is called with the step, what it returns
    being answered the same way. ``answers`` may instead be one callable
    that answers every step (by the step's method name, say).
    ``started``: the caller took the first step already (``next(gen)``, to
    look at it); the first answer is for that step.
    ``run_calls``: a :class:`~webtier._core.protocol.Call` step is answered by
    running it (a pause, a ``functools.partial``, is skipped) and takes no
    answer.

    Fails when ``gen`` asks for more steps than there are answers, or ends
    with answers left over. An error ``gen`` raises goes to the caller."""
    if callable(answers):
        answer_of: Callable[[Any], Any] = answers
    else:
        queue = list(answers)
        queue.reverse()

        def answer_of(step: Any) -> Any:
            assert queue, f"the generator wanted an answer to a step not foreseen: {step!r}"
            given = queue.pop()
            return given(step) if callable(given) else given

    steps: list[Any] = []
    answer: Any = None
    try:
        if started:
            answer = answer_of(None)
        else:
            step = next(gen)
            steps.append(step)
            answer = _answer(step, answer_of, run_calls)
        while True:
            if isinstance(answer, BaseException):
                step = gen.throw(answer)
            else:
                step = gen.send(answer)
            steps.append(step)
            answer = _answer(step, answer_of, run_calls)
    except StopIteration as done:
        if not callable(answers):
            assert not queue, f"the generator ended with {len(queue)} answers left"
        return Driven(done.value, steps)


def _answer(step: Any, answer_of: Callable[[Any], Any], run_calls: bool) -> Any:
    if run_calls and isinstance(step, Call):
        if isinstance(step.blocking, functools.partial):  # a pause: skip it
            return None
        return step.blocking()
    return answer_of(step)


async def run_op(tier: Any, op: Op[Any]) -> Any:
    """Run an operation on the tier's own transport, on either API."""
    if isinstance(tier, InThread):
        return await anyio.to_thread.run_sync(tier._wrapped.transport.run, op)
    return await tier.transport.run(op)


class InThread:
    """Exposes a sync facade with awaitable methods, run in a worker thread,
    so one async test body covers the sync API too."""

    def __init__(self, wrapped: Any) -> None:
        self._wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._wrapped, name)
        if isinstance(value, Part):
            return InThread(value)
        if callable(value) and not isinstance(value, type):

            async def call(*args: Any, **kwargs: Any) -> Any:
                return await anyio.to_thread.run_sync(functools.partial(value, *args, **kwargs))

            return call
        return value


def sampled_pick(stored: list[int], cutoff: int, page: int) -> list[Any]:
    """What session_pick.lua answers in 'sample' mode (the integration
    tests hold the script to this)."""
    last = min(page, len(stored)) - 1
    ranks = list(range(min(4, last) + 1))
    rank = 4
    while rank < last:
        rank = min(math.floor(rank * 1.5), last)
        ranks.append(rank)
    reply: list[Any] = [str(cutoff).encode(), len(stored), sum(s < cutoff for s in stored)]
    for rank in ranks:
        reply += [rank, str(stored[rank]).encode()]
    return reply


def slow_job(seconds: float, marker: str) -> Job:
    """A job whose step works for ``seconds``, then leaves a marker."""

    def step(cfg: Config, pass_number: int) -> Op[JobStep]:
        time.sleep(seconds)
        yield write(f"{cfg.prefix}:marker", ("INCR", f"{cfg.prefix}:{marker}"), idempotent=False)
        return JobStep(0.01, "slow step done")

    return Job("slow", step)
