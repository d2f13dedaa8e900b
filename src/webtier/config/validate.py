"""Checks shared by every settings class: each raises ConfigError."""

from __future__ import annotations

from typing import TYPE_CHECKING

from webtier.errors import ConfigError

if TYPE_CHECKING:
    pass


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_seconds(value: object, low: float, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high


def require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)
