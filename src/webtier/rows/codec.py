"""Database rows as JSON text that decodes back to equal values.

A cached row is stored as ``{"row": {column: value, ...}, "types": {column:
type, ...}}``. Values JSON has (null, booleans, integers, finite floats,
strings, and lists and objects of them, as JSON columns hold) are stored as
they are. The others are stored as text or numbers and named in ``types``,
so a reader restores them without knowing the table:

===========  ===================================  ==========================
type         stored as                            example
===========  ===================================  ==========================
decimal      ``str(value)`` (keeps the exponent)  ``"12.50"``
datetime     ISO 8601, with its UTC offset    ``"2024-05-01T10:00:00+02:00"``
             and IANA zone if any (RFC 9557)  ``"...+02:00[Europe/Paris]"``
date         ISO 8601                             ``"2024-05-01"``
time         ISO 8601, with its UTC offset if any ``"10:00:00.250000"``
timedelta    ``[days, seconds, microseconds]``    ``[1, 30, 0]``
uuid         canonical text                       ``"1b4e28ba-..."``
bytes        base64                               ``"AAEC"``
float        ``"nan"``, ``"inf"`` or ``"-inf"``   (JSON has no such numbers)
===========  ===================================  ==========================

Readers in other languages get plain JSON with decimals as strings (exact,
as money must be) and can read ``types`` if they care. Nothing here is
pickle: decoding is data only, whatever Redis holds.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from webtier.errors import InvalidInput

_NATIVE = (str, int, float, bool, type(None))


def _float(value: float) -> tuple[str | None, Any]:
    if math.isfinite(value):
        return None, value
    return "float", "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def _timedelta(value: dt.timedelta) -> tuple[str, Any]:
    return "timedelta", [value.days, value.seconds, value.microseconds]


def _datetime(value: dt.datetime) -> tuple[str, Any]:
    text = value.isoformat()
    zone = value.tzinfo
    if isinstance(zone, ZoneInfo) and zone.key:
        # The offset alone would not do: Python never finds a time in a
        # zone's fold equal to one with a fixed offset. RFC 9557's suffix.
        text += f"[{zone.key}]"
    return "datetime", text


def _parse_datetime(text: str) -> dt.datetime:
    if not text.endswith("]"):
        return dt.datetime.fromisoformat(text)
    stamp, _, key = text[:-1].partition("[")
    fixed = dt.datetime.fromisoformat(stamp)
    zone = ZoneInfo(key)
    # The stored offset tells which of a fold's two times it was.
    value = fixed.replace(tzinfo=zone, fold=0)
    if value.utcoffset() != fixed.utcoffset():
        value = value.replace(fold=1)
    return value


def _bytes(value: bytes | bytearray | memoryview) -> tuple[str, Any]:
    return "bytes", base64.b64encode(value).decode()


# Order matters: a datetime is also a date.
_ENCODERS: tuple[tuple[type[Any], Callable[[Any], tuple[str | None, Any]]], ...] = (
    (float, _float),
    (Decimal, lambda v: ("decimal", str(v))),
    (dt.datetime, _datetime),
    (dt.date, lambda v: ("date", v.isoformat())),
    (dt.time, lambda v: ("time", v.isoformat())),
    (dt.timedelta, _timedelta),
    (uuid.UUID, lambda v: ("uuid", str(v))),
    (bytes, _bytes),
    (bytearray, _bytes),
    (memoryview, _bytes),
)

_DECODERS: dict[str, Callable[[Any], Any]] = {
    "decimal": Decimal,
    "datetime": _parse_datetime,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "uuid": uuid.UUID,
    "bytes": base64.b64decode,
    "float": float,
}


def _plain(value: Any) -> bool:
    """Whether ``value`` comes back equal from JSON as it is (lists and dicts
    of such values included; a tuple would come back a list)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, _NATIVE):
        return True
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def encode(row: Mapping[str, Any]) -> str:
    """The JSON text of a row; refuses values it could not give back equal."""
    values: dict[str, Any] = {}
    types: dict[str, str] = {}
    for column, value in row.items():
        if not isinstance(column, str):
            raise InvalidInput("row", f"column names must be str, not {type(column).__name__}")
        kind, stored = _encode_value(column, value)
        values[column] = stored
        if kind is not None:
            types[column] = kind
    document: dict[str, Any] = {"row": values}
    if types:
        document["types"] = types
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _encode_value(column: str, value: Any) -> tuple[str | None, Any]:
    for kind, encoder in _ENCODERS:
        if isinstance(value, kind):
            return encoder(value)
    if _plain(value):
        return None, value
    if isinstance(value, list | dict):
        raise InvalidInput(
            "row",
            f"column {column!r} holds a list or object with values that would not come "
            "back equal from JSON (only top-level decimals, dates, times, UUIDs, bytes "
            "are typed)",
        )
    raise InvalidInput(
        "row", f"column {column!r} holds a {type(value).__name__}, which webtier cannot cache"
    )


def decode(text: str | bytes) -> dict[str, Any]:
    """The row that :func:`encode` stored as ``text``."""
    document = json.loads(text)
    row: dict[str, Any] = document["row"]
    for column, kind in document.get("types", {}).items():
        row[column] = _DECODERS[kind](row[column])
    return row
