"""Rows as JSON: every supported value comes back equal; others are refused."""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webtier.errors import InvalidInput
from webtier.rows.codec import decode, encode

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
typed_values = (
    st.decimals(allow_nan=False)
    | st.datetimes()
    | st.datetimes(timezones=st.timezones())
    | st.dates()
    | st.times()
    | st.times(timezones=st.timezones())
    | st.timedeltas()
    | st.uuids()
    | st.binary()
    | st.sampled_from([math.inf, -math.inf])
)
rows = st.dictionaries(st.text(), json_values | typed_values, max_size=8)


@given(rows)
def test_every_row_comes_back_equal(row: dict[str, Any]) -> None:
    back = decode(encode(row))
    assert back == row
    assert [type(v) for v in back.values()] == [type(v) for v in row.values()]


def test_zoned_times_in_a_fold_come_back_equal() -> None:
    # Python never finds a time in a zone's fold equal to one with a fixed
    # offset: the zone itself must come back, with the right fold.
    paris = ZoneInfo("Europe/Paris")
    for fold in (0, 1):
        value = dt.datetime(2024, 10, 27, 2, 30, tzinfo=paris, fold=fold)
        back = decode(encode({"t": value}))["t"]
        assert back == value
        assert back.tzinfo is paris
        assert back.utcoffset() == value.utcoffset()
    assert '"2024-10-27T02:30:00+01:00[Europe/Paris]"' in encode({"t": value})


def test_nan_comes_back_nan_and_decimal_keeps_its_exponent() -> None:
    back = decode(encode({"f": math.nan, "d": Decimal("12.50"), "n": Decimal("NaN")}))
    assert math.isnan(back["f"])
    assert str(back["d"]) == "12.50"
    assert back["n"].is_nan()


def test_the_text_is_plain_json_with_a_type_map() -> None:
    row = {
        "id": 7,
        "price": Decimal("9.99"),
        "day": dt.date(2024, 5, 1),
        "sku": uuid.UUID(int=1),
        "gone": None,
    }
    document = json.loads(encode(row))
    assert document == {
        "row": {
            "id": 7,
            "price": "9.99",
            "day": "2024-05-01",
            "sku": "00000000-0000-0000-0000-000000000001",
            "gone": None,
        },
        "types": {"price": "decimal", "day": "date", "sku": "uuid"},
    }
    assert "types" not in json.loads(encode({"a": 1}))


@pytest.mark.parametrize(
    "row",
    [
        {"x": object()},
        {"x": {1, 2}},
        {"x": (1, 2)},  # would come back a list
        {"x": [Decimal(1)]},  # typed values inside JSON are not typed
        {"x": {"nested": dt.date(2024, 1, 1)}},
        {1: "not a str column"},
    ],
)
def test_values_that_would_not_come_back_equal_are_refused(row: dict[Any, Any]) -> None:
    with pytest.raises(InvalidInput):
        encode(row)
