"""The traffic model: who visits the shop, and what each visitor does.

Pure, no I/O: a seeded :class:`random.Random` decides everything, so a
visit's plan can be tested without a server and a run repeated with the
same seed. :mod:`webtier.demo.loadgen.driver` turns a plan into requests.

Visitors arrive as a Poisson process (exponential gaps, :meth:`Traffic.gap`).
Each looks at the home page, then at a few items whose popularity follows
Zipf's law (item 1 the most viewed, item ``r`` viewed ``1/r**s`` as often;
``s`` about 1.1, as product views in real shops), may put some of them in
the cart, log in, check out, look at their account, log out, and may come
back later with the same cookies (:class:`Returning`).
"""

from __future__ import annotations

import bisect
import itertools
import random
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Literal

from webtier.errors import ConfigError

# What a visitor does, in the order of its plan; the driver maps each to
# its requests (a form's page first, then the POST and its redirect).
Action = Literal["home", "item", "cart", "add", "login", "checkout", "account", "flash", "logout"]


@dataclass(frozen=True, slots=True)
class Step:
    """One thing a visitor does: ``item`` and ``count`` for ``item`` and
    ``add`` (the cart's new quantity of that item), ``user`` for ``login``."""

    action: Action
    item: int | None = None
    count: int | None = None
    user: str | None = None


class Zipf:
    """Item ids 1..``items`` drawn with probability proportional to
    ``1 / id**s``: the cumulative weights are computed once (8 bytes an item)
    and each draw is a binary search."""

    def __init__(self, items: int, s: float = 1.1) -> None:
        if items < 1:
            raise ConfigError(f"items must be >= 1 (got {items})")
        if not 0 < s <= 10:
            raise ConfigError(f"the Zipf exponent s must be in (0, 10] (got {s})")
        self.items, self.s = items, s
        weights = (rank**-s for rank in range(1, items + 1))
        self._cumulative = array("d", itertools.accumulate(weights))

    @property
    def total(self) -> float:
        return float(self._cumulative[-1])

    def probability(self, item: int) -> float:
        """The share of draws that give ``item``."""
        return float(item**-self.s / self.total)

    def draw(self, rng: random.Random) -> int:
        point = rng.random() * self.total
        return min(bisect.bisect_right(self._cumulative, point), self.items - 1) + 1


@dataclass(frozen=True, slots=True)
class Traffic:
    """How visitors behave; the defaults make a plausible shop: about eight
    pages a visit, a quarter of visitors filling a cart, one in ten buying."""

    items: int = 100_000  # the shop's item ids are 1..items
    users: int = 1_000  # usernames user1..userN, drawn uniformly at login
    zipf_s: float = 1.1  # item popularity exponent
    items_per_visit: float = 4.0  # mean item pages a visit (geometric, at least 1)
    cart: float = 0.25  # share of visitors who put something in the cart
    checkout: float = 0.4  # share of those with a cart who check out (logging in first)
    login: float = 0.15  # share of the others who log in anyway
    logout: float = 0.3  # share of logged-in visitors who log out at the end
    account: float = 0.1  # share of logged-in visitors who look at their sessions
    flash_sale: float = 0.05  # share of visitors who look at the flash sale
    comes_back: float = 0.3  # share of visitors who keep their cookies to return
    returning: float = 0.2  # share of arrivals who are returning visitors, when any wait

    def __post_init__(self) -> None:
        if self.items < 1 or self.users < 1:
            raise ConfigError("items and users must be >= 1")
        if not self.items_per_visit >= 1:
            raise ConfigError("items_per_visit must be >= 1")
        shares = (self.cart, self.checkout, self.login, self.logout, self.account,
                  self.flash_sale, self.comes_back, self.returning)  # fmt: skip
        if not all(0 <= share <= 1 for share in shares):
            raise ConfigError("the shares of visitors must be in [0, 1]")

    def username(self, rng: random.Random) -> str:
        return f"user{rng.randrange(1, self.users + 1)}"

    def plan(self, rng: random.Random, zipf: Zipf, *, logged_in: bool = False) -> list[Step]:
        """What one visitor does, in order. ``logged_in``: a returning
        visitor whose cookies still hold a user's session."""
        steps = [Step("home")]
        viewed = []
        # Geometric number of item pages with the configured mean, >= 1.
        stop_after_each = 1 / self.items_per_visit
        while True:
            item = zipf.draw(rng)
            viewed.append(item)
            steps.append(Step("item", item=item))
            if rng.random() < stop_after_each:
                break
        filled = rng.random() < self.cart
        if filled:
            # A quarter of the viewed items (at least one), one to three of each.
            chosen = rng.sample(viewed, max(1, len(viewed) // 4))
            steps += [Step("add", item=item, count=rng.randint(1, 3)) for item in chosen]
            steps.append(Step("cart"))
        if rng.random() < self.flash_sale:
            steps.append(Step("flash"))
        buys = filled and rng.random() < self.checkout
        if not logged_in and (buys or rng.random() < self.login):
            steps.append(Step("login", user=self.username(rng)))
            logged_in = True
        if buys:
            steps.append(Step("checkout"))
        if logged_in and rng.random() < self.account:
            steps.append(Step("account"))
        if logged_in and rng.random() < self.logout:
            steps.append(Step("logout"))
        return steps

    @staticmethod
    def gap(rng: random.Random, rate: float) -> float:
        """Seconds to the next arrival of a Poisson process of ``rate``/s."""
        return rng.expovariate(rate)


@dataclass(slots=True)
class Visitor:
    """A browser's state between visits: its cookies and whether they hold
    a logged-in session."""

    cookies: dict[str, str]
    logged_in: bool = False


class Returning:
    """The visitors who will come back, at most ``limit`` of them (the
    oldest forgotten first), so a long run's memory stays bounded."""

    def __init__(self, limit: int = 2_000) -> None:
        self._waiting: deque[Visitor] = deque(maxlen=limit)

    def __len__(self) -> int:
        return len(self._waiting)

    def leave(self, visitor: Visitor, traffic: Traffic, rng: random.Random) -> None:
        """A visit ended: the visitor may come back later."""
        if visitor.cookies and rng.random() < traffic.comes_back:
            self._waiting.append(visitor)

    def arrive(self, traffic: Traffic, rng: random.Random) -> Visitor:
        """The next visitor: a returning one with its cookies, or a new one."""
        if self._waiting and rng.random() < traffic.returning:
            # Any of them, not the newest: people come back after a while.
            index = rng.randrange(len(self._waiting))
            self._waiting.rotate(-index)
            visitor = self._waiting.popleft()
            self._waiting.rotate(index)
            return visitor
        return Visitor({})
