"""A client-side copy of the N most viewed items, refreshed every few
seconds, so an admission test ("is this item in the top 10,000?") costs a
dict lookup instead of a ZREVRANK: what the sync and asyncio copies
(:class:`~webtier.ranking.TopItems`, :class:`~webtier.ranking.AsyncTopItems`)
share. The copy is up to ``refresh`` seconds old; the ranking is halved every
5 minutes, so that changes nothing that matters."""

from __future__ import annotations

import logging
import time

from webtier._core.protocol import Op
from webtier.config import Config
from webtier.errors import ConfigError, InvalidInput, WebtierError
from webtier.ranking import ops

log = logging.getLogger("webtier.ranking")


class TopCopy:
    """What the sync and asyncio top sets share: the copy and its checks."""

    def __init__(self, config: Config, n: int, refresh: float) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1_000_000:
            raise ConfigError("n must be an int, 1..1000000")
        if not (isinstance(refresh, int | float) and 0 < refresh <= 86400):
            raise ConfigError("refresh must be 0 to 86400 seconds")
        self._config, self.n, self.refresh = config, n, refresh
        self._ranks: dict[str, int] = {}
        self.loaded_at: float | None = None  # time.monotonic() of the last load
        self._failing = False

    def rank(self, item: str) -> int | None:
        """``item``'s place (0 = most viewed) as of the last refresh, or None
        if it was not among the ``n`` most viewed."""
        return self._ranks.get(item)

    def admits(self, item: str, top: int | None = None) -> bool:
        """Whether ``item`` was among the ``top`` (default ``n``) most viewed
        at the last refresh. False before the first load succeeds."""
        if top is None:
            top = self.n
        elif isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= self.n:
            raise InvalidInput("top", f"must be 0..{self.n}, the size of this set", top)
        rank = self._ranks.get(item)
        return rank is not None and rank < top

    def __len__(self) -> int:
        return len(self._ranks)

    def _load(self) -> Op[None]:
        items = yield from ops.top_items(self._config, self.n)
        # One assignment: readers see the old copy or the new one, never a mix.
        self._ranks = {item: place for place, item in enumerate(items)}
        self.loaded_at = time.monotonic()

    def _outcome(self, error: WebtierError | None) -> bool:
        # An outage is logged when it starts and when it ends, not per refresh;
        # meanwhile the last copy keeps answering.
        if error is None:
            if self._failing:
                log.warning("top %d items: refreshed again", self.n)
            self._failing = False
            return True
        if not self._failing:
            log.warning("top %d items: refresh failed, keeping the last copy: %s", self.n, error)
        self._failing = True
        return False
