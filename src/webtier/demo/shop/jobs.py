"""The shop's maintenance in its own process, for the demo: the session
cap, counter cleanup, row refresh and ranking rescale, and the rows of the
most viewed items kept cached ahead of their views, run by webtier's
asyncio worker in the app's lifespan. In production ``webtier worker``
runs the same jobs in processes of their own, as many as wanted."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator

from webtier.aio import WebTier as AsyncWebTier
from webtier.config import Config
from webtier.demo.shop.settings import FLASH_SALE_ITEMS, ShopSettings
from webtier.rows.sql import SqlSource
from webtier.workers import JOBS, AsyncWorker, warm_rows

log = logging.getLogger("webtier.shop")

STOP_WAIT = 5.0  # seconds a warm stop may take before the step is cut short


def jobs_config(config: Config, inventory: SqlSource, settings: ShopSettings) -> Config:
    """The tier's config as the worker needs it: the inventory among the
    row sources it refreshes, and the shop's session cap."""
    rows = config.rows
    if all(source.name != inventory.name for source in rows.sources):
        rows = dataclasses.replace(rows, sources=(*rows.sources, inventory))
    sessions = config.sessions
    if settings.session_cap is not None:
        sessions = dataclasses.replace(sessions, limit=settings.session_cap)
    return dataclasses.replace(config, rows=rows, sessions=sessions)


async def schedule_flash_sale(
    tier: AsyncWebTier, inventory: SqlSource, settings: ShopSettings
) -> None:
    """The flash-sale rows, refreshed by the worker every ``flash_refresh``
    seconds (the book's ``schedule_row_cache``)."""
    for item_id in FLASH_SALE_ITEMS:
        if item_id <= settings.items:
            await tier.rows.schedule(inventory, item_id, settings.flash_refresh)


@contextlib.asynccontextmanager
async def maintenance(
    tier: AsyncWebTier, inventory: SqlSource, settings: ShopSettings
) -> AsyncIterator[AsyncWorker]:
    """A worker running every job until the block ends, then stopped warm
    (cold after :data:`STOP_WAIT`)."""
    jobs = [*JOBS.values()]
    if settings.warm_rows:
        jobs.append(warm_rows(inventory, min(settings.warm_rows, settings.items)))
    worker = AsyncWorker(
        AsyncWebTier(tier.client, jobs_config(tier.config, inventory, settings)), jobs
    )
    task = asyncio.create_task(worker.run(), name="webtier-shop-worker")
    try:
        yield worker
    finally:
        worker.request_stop()
        try:
            await asyncio.wait_for(asyncio.shield(task), STOP_WAIT)
        except TimeoutError:
            worker.request_force_stop()
            await task
        except Exception as error:  # a worker that ended on an error says so once
            log.error("the shop's worker stopped: %s", error)
