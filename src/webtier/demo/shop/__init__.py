"""Fake Web Retailer, the demo shop: a Starlette app whose every page runs
through webtier (sessions, carts, the page cache, the row cache, the view
ranking, counters and access times). Needs the ``shop`` extra.

- :func:`~webtier.demo.shop.app.create_app` builds it on an asyncio tier
  and a database (``webtier demo`` serves it with uvicorn);
- :mod:`~webtier.demo.shop.catalog`: its SQL side (items, orders), no Redis;
- ``templates/``: Jinja2 pages rendered from plain data only, so other
  stacks (the book's listings, SQL alone) can render the same pages.

docs/shop.md maps each page onto the book's sections and webtier's API.
"""

from typing import TYPE_CHECKING

from webtier.demo.shop.settings import FLASH_SALE_ITEMS, ShopSettings
from webtier.web._lazy import lazy

if TYPE_CHECKING:
    from webtier.demo.shop.app import create_app

# The app needs Starlette and Jinja2: imported on first use.
__getattr__ = lazy(__name__, {"create_app": "webtier.demo.shop.app"})

__all__ = ["FLASH_SALE_ITEMS", "ShopSettings", "create_app"]
