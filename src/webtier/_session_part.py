"""What the sync and asyncio ``Sessions`` parts share: the view counter a
touch sends its item views through."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webtier._facade import Part
from webtier._ops import sessions as session_ops
from webtier._protocol import Op, Request
from webtier.config import Config


class SessionsPart(Part):
    def __init__(
        self,
        run: Callable[[Op[Any]], Any],
        config: Config,
        view_counter: Callable[[str], tuple[Request, ...]] | None = None,
    ) -> None:
        super().__init__(run, config)
        # Counts an item view in the touch's own round trip (tier.ranking.view_requests).
        self._view_counter = view_counter

    def _touch(self, token: str, user: str | None, item: str | None) -> Op[bool]:
        return session_ops.touch(
            self._config, token, user=user, item=item, view_counter=self._view_counter
        )
