"""What the sync and asyncio ``Sessions`` parts share: the view counter a
touch sends its item views through."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webtier._core.facade import Part
from webtier._core.protocol import Op
from webtier._ops import sessions as session_ops
from webtier.config import Config
from webtier.ranking.views import ViewCounter


class SessionsPart(Part):
    def __init__(
        self,
        run: Callable[[Op[Any]], Any],
        config: Config,
        views: ViewCounter | None = None,
    ) -> None:
        super().__init__(run, config)
        # How a touch counts its item view: the tier's (tier.ranking.views).
        self._views = views

    def _touch(self, token: str, user: str | None, item: str | None) -> Op[bool]:
        return session_ops.touch(self._config, token, user=user, item=item, views=self._views)
