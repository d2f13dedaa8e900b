"""What every page of the shop shares: the :class:`Shop` (tier, database,
inventory source, templates) and the visitor as plain data.

Pages are rendered from plain data only (item row dicts, the cart as
{item id: count}, the username or None, notices), never from webtier
objects, so other stacks can render the same templates.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import sqlalchemy as sa
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from webtier.aio import WebTier as AsyncWebTier
from webtier.demo.shop.settings import FLASH_SALE_ITEMS, SESSION_COOKIE, ShopSettings
from webtier.errors import DatabaseUnavailable
from webtier.pagecache.holes import Holes, Visit
from webtier.rows.ops import first_line
from webtier.rows.sql import SqlSource
from webtier.web.sessions import AsyncSession

T = TypeVar("T")
Row = dict[str, Any]

# Written where a form's CSRF token goes; security.Defences puts the
# visitor's own token there as the page goes out, so a page the page cache
# keeps for every anonymous visitor holds no one's token (the book's Edge
# Side Includes idea, for one value).
CSRF_PLACEHOLDER = "@@webtier-csrftoken@@"

NOTICES = "notices"  # session data field: messages for the next page shown


@dataclass(frozen=True, slots=True)
class Visitor:
    """Who is asking, as the templates see it."""

    user: str | None = None
    cart: dict[int, int] = field(default_factory=dict)
    notices: tuple[str, ...] = ()

    @property
    def cart_units(self) -> int:
        return sum(self.cart.values())


def templates() -> Jinja2Templates:
    environment = Environment(
        loader=PackageLoader("webtier.demo.shop", "templates"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
        # The templates ship with the package and never change while it
        # runs: no stat of the file on every render (2 % of a worker's CPU).
        auto_reload=False,
    )
    environment.filters["money"] = lambda value: f"${float(value):,.2f}"
    return Jinja2Templates(env=environment)


def shop_holes(pages: Jinja2Templates) -> Holes:
    """The visitor's parts of the pages the page cache keeps for every
    visitor (the home page, the item pages, the flash sale): filled from
    the session by the same macros that write them in other pages
    (templates/_visitor.html). Sets the templates' ``hole`` to their
    markers."""
    parts = pages.env.get_template("_visitor.html").module

    # Each part is a macro of a plain value or two, and the same values come
    # again and again (a user's name, small cart counts): each made once.
    made = functools.partial(functools.lru_cache, maxsize=4096)
    greeting, cart_badge = made()(parts.greeting), made()(parts.cart_badge)  # type: ignore[attr-defined]
    quantity, buy_label = made()(parts.quantity), made()(parts.buy_label)  # type: ignore[attr-defined]
    viewed = made()(parts.viewed)  # type: ignore[attr-defined]
    welcome = made()(parts.welcome)  # type: ignore[attr-defined]
    recently_viewed = made()(parts.recently_viewed)  # type: ignore[attr-defined]

    def in_cart(visit: Visit, item: str) -> int:
        return visit.cart.get(item, 0)

    holes = Holes(
        {
            "greeting": lambda visit: greeting(visit.user, CSRF_PLACEHOLDER),
            "cart_badge": lambda visit: cart_badge(visit.cart_units),
            "quantity": lambda visit, item: quantity(in_cart(visit, item)),
            "buy_label": lambda visit, item: buy_label(in_cart(visit, item)),
            "viewed": lambda visit: viewed(visit.viewed),
            "welcome": lambda visit: welcome(visit.user),
            "recently_viewed": lambda visit: recently_viewed(visit.viewed),
        }
    )
    pages.env.globals["hole"] = holes.mark
    return holes


def render(
    pages: Jinja2Templates,
    request: Request,
    template: str,
    visitor: Visitor,
    *,
    status: int = 200,
    **data: Any,
) -> HTMLResponse:
    """A page of the shop's templates for ``visitor``, from plain data: what
    every stack that serves these pages (the benchmark's too) renders.
    ``holes=True`` writes the visitor's parts as holes (see shop_holes)."""
    context = {
        "user": visitor.user,
        "cart_units": visitor.cart_units,
        "notices": visitor.notices,
        "csrftoken": CSRF_PLACEHOLDER,
        "path": request.url.path,
        **data,
    }
    return pages.TemplateResponse(request, template, context, status_code=status)


def render_item(
    pages: Jinja2Templates,
    request: Request,
    visitor: Visitor,
    item_id: int,
    row: Row,
    *,
    holes: bool = False,
) -> HTMLResponse:
    """The item page of ``row`` for ``visitor``, in every stack alike; with
    ``holes``, the same for every visitor, their parts left as holes."""
    return render(
        pages,
        request,
        "item.html",
        visitor,
        item=row,
        in_cart=visitor.cart.get(item_id, 0),
        flash_sale=item_id in FLASH_SALE_ITEMS,
        holes=holes,
    )


class Shop:
    """The shop's parts, kept on ``app.state.shop``."""

    def __init__(
        self, tier: AsyncWebTier, engine: sa.Engine, inventory: SqlSource, settings: ShopSettings
    ) -> None:
        self.tier, self.engine, self.inventory, self.settings = tier, engine, inventory, settings
        self.templates = templates()
        self.holes = shop_holes(self.templates)
        self.limiter = anyio.CapacityLimiter(settings.sql_threads)

    async def sql(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking database call in a worker thread. A database that
        cannot be used (locked past ``settings.sql_wait``, gone, broken) is
        :class:`~webtier.errors.DatabaseUnavailable`: the app's 503 page."""
        bound = functools.partial(call, *args, **kwargs)
        try:
            return await anyio.to_thread.run_sync(bound, limiter=self.limiter)
        except sa.exc.IntegrityError:
            raise  # a constraint the call did not expect: a bug, not an outage
        except sa.exc.DBAPIError as error:
            raise DatabaseUnavailable(f"the shop's database: {first_line(error)}") from error

    # -- items, from the row cache ----------------------------------------------------
    def item_id(self, text: str) -> int | None:
        """The item id a path names, or None (not a decimal id of the shop)."""
        # One spelling per item ("7", never "07"): one page to cache, one
        # member of the ranking.
        if not text.isascii() or not text.isdigit() or len(text) > 9 or text.startswith("0"):
            return None
        number = int(text)
        return number if 1 <= number <= self.settings.items else None

    async def item(self, item_id: int) -> Row | None:
        """An item's row from the row cache, read through to SQL on a miss."""
        return await self.tier.rows.get(self.inventory, item_id, load=True)

    async def items(self, item_ids: Iterable[int]) -> list[Row]:
        """Rows of several items, in the order given, from the row cache in
        one round trip; those not cached are read through with one query."""
        wanted = [i for i in dict.fromkeys(item_ids) if 1 <= i <= self.settings.items]
        found = await self.tier.rows.get_many(self.inventory, wanted, load=True) if wanted else {}
        return [row for item_id in wanted if (row := found.get(item_id)) is not None]

    # -- the visitor ---------------------------------------------------------------
    async def visitor(self, request: Request, *, notices: bool = True) -> Visitor:
        """The visitor's name, cart and notices (taking the notices: they
        show once). A visitor without a session cookie costs no Redis call."""
        if SESSION_COOKIE not in request.cookies:
            return Visitor()
        session = session_of(request)
        # Taken first: the request's first read removes them in its load.
        shown = tuple(await session.pop(NOTICES, ())) if notices else ()
        user = await session.user()
        cart = {int(item): count for item, count in (await session.cart()).items()}
        return Visitor(user, cart, shown)

    def page(
        self,
        request: Request,
        template: str,
        visitor: Visitor,
        *,
        status: int = 200,
        **data: Any,
    ) -> HTMLResponse:
        return render(self.templates, request, template, visitor, status=status, **data)

    async def problem(
        self, request: Request, status: int, title: str, message: str
    ) -> HTMLResponse:
        """An error page (4xx, or 503 for an outage) that says what went
        wrong in one sentence."""
        visitor = await self.visitor(request, notices=False)
        return self.page(
            request, "problem.html", visitor, status=status, title=title, message=message
        )


async def notify(
    session: AsyncSession, message: str, also: Mapping[str, Any] | None = None
) -> None:
    """Keep ``message`` for the next page the visitor sees; ``also``: other
    session values set in the same write."""
    waiting = list(await session.get(NOTICES, ()))
    await session.update({NOTICES: [*waiting[-4:], message], **(also or {})})


def shop_of(request: Request) -> Shop:
    shop: Shop = request.app.state.shop
    return shop


def session_of(request: Request) -> AsyncSession:
    session: AsyncSession = request.state.session
    return session
