"""access_time: a context manager, a decorator and an async context manager,
on every target."""

from __future__ import annotations

import asyncio
import time

import pytest

import webtier

ACCESS = "AccessTime"
pytestmark = pytest.mark.usefixtures("steady_hour")


@pytest.fixture
def tier(sync_client: webtier.WebTier, config: webtier.Config) -> webtier.WebTier:
    return webtier.WebTier(sync_client, config)  # type: ignore[arg-type]


@pytest.fixture
def atier(async_client: object, config: webtier.Config) -> webtier.AsyncWebTier:
    return webtier.AsyncWebTier(async_client, config)  # type: ignore[arg-type]


class Boom(Exception):
    pass


def test_a_block_is_timed_and_ranked(tier: webtier.WebTier) -> None:
    with tier.stats.access_time("/item/{id}"):
        time.sleep(0.02)
    summary = tier.stats.get("/item/{id}", ACCESS)
    assert summary.count == 1
    assert 0.02 <= summary.min < 1  # type: ignore[operator]
    assert summary.errors == 0
    assert tier.stats.slowest(5) == [("/item/{id}", summary.mean)]


def test_a_block_that_raises_is_recorded_as_an_error(tier: webtier.WebTier) -> None:
    def pay() -> None:
        with tier.stats.access_time("/pay"):
            time.sleep(0.01)
            raise Boom

    with pytest.raises(Boom):
        pay()
    summary = tier.stats.get("/pay", ACCESS)
    assert (summary.count, summary.errors) == (1, 1)
    assert summary.min >= 0.01  # type: ignore[operator]


def test_a_process_on_its_way_out_is_not_held_up(tier: webtier.WebTier) -> None:
    with pytest.raises(KeyboardInterrupt), tier.stats.access_time("/quit"):
        raise KeyboardInterrupt
    assert tier.stats.get("/quit", ACCESS).count == 0


def test_a_decorated_function_is_timed_on_every_call(tier: webtier.WebTier) -> None:
    @tier.stats.access_time("/render")
    def render(name: str) -> str:
        """Render a page."""
        if name == "boom":
            raise Boom
        return f"<h1>{name}</h1>"

    assert render("a") == "<h1>a</h1>"
    assert render(name="b") == "<h1>b</h1>"
    with pytest.raises(Boom):
        render("boom")
    assert (render.__name__, render.__doc__) == ("render", "Render a page.")
    summary = tier.stats.get("/render", ACCESS)
    assert (summary.count, summary.errors) == (3, 1)


def test_a_bad_context_is_refused_before_the_block_runs(tier: webtier.WebTier) -> None:
    ran = False
    with pytest.raises(webtier.InvalidInput, match="context"), tier.stats.access_time(""):
        ran = True
    assert not ran


@pytest.mark.anyio
async def test_an_async_block_is_timed(atier: webtier.AsyncWebTier) -> None:
    async with atier.stats.access_time("/a"):
        await asyncio.sleep(0.02)
    with pytest.raises(Boom):
        async with atier.stats.access_time("/a"):
            raise Boom
    summary = await atier.stats.get("/a", ACCESS)
    assert (summary.count, summary.errors) == (2, 1)
    assert summary.max >= 0.02  # type: ignore[operator]


@pytest.mark.anyio
async def test_an_async_function_is_timed_on_every_call(atier: webtier.AsyncWebTier) -> None:
    @atier.stats.access_time("/api/{id}")
    async def handler(item: int) -> int:
        await asyncio.sleep(0)
        return item * 2

    assert await asyncio.gather(*(handler(i) for i in range(5))) == [0, 2, 4, 6, 8]
    assert (await atier.stats.get("/api/{id}", ACCESS)).count == 5
    with pytest.raises(TypeError, match="coroutine"):
        atier.stats.access_time("/x")(lambda: None)  # type: ignore[arg-type, return-value]


@pytest.mark.anyio
async def test_a_cancelled_block_is_not_recorded(atier: webtier.AsyncWebTier) -> None:
    async def slow() -> None:
        async with atier.stats.access_time("/slow"):
            await asyncio.sleep(10)

    task = asyncio.ensure_future(slow())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await atier.stats.get("/slow", ACCESS)).count == 0
