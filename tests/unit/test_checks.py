"""The shared checks of user input, and the escapes of issue #12 they close."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webtier._checks import MAX_INT, MAX_TIME, check_integer, check_limit, check_real, check_time
from webtier._keys import MAX_NAME_BYTES, check_int_id, check_list, check_names
from webtier.config import Config
from webtier.errors import InvalidInput
from webtier.rowsource import FunctionSource

CFG = Config(prefix="p")
SOURCE = FunctionSource("src", lambda key: {"id": key})
HUGE = 10**5000  # past Python's 4,300-digit limit on printing ints


def _id(value: object) -> str | None:
    """A test id for a huge int (pytest's own would print it, and fail)."""
    return "huge-int" if isinstance(value, int) and value.bit_length() > 10_000 else None


def refused(op: Any) -> InvalidInput:
    """The InvalidInput an operation raises before it sends anything."""
    with pytest.raises(InvalidInput) as raised:
        next(op)
    str(raised.value)  # and it can be shown
    return raised.value


# -- numbers ---------------------------------------------------------------------------------

NOT_NUMBERS = [True, False, None, "1", b"1", [1], complex(1, 0), object()]
NOT_FINITE = [math.nan, math.inf, -math.inf, Decimal("NaN"), Decimal("sNaN"), Decimal("-Infinity")]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3.0), (-0.0, 0.0), (2.5, 2.5), (Fraction(1, 4), 0.25), (Decimal("2.5"), 2.5)],
)
def test_check_real_takes_every_kind_of_number(value: object, expected: float) -> None:
    number = check_real("v", value, -10, 10)
    assert number == expected
    assert type(number) is float
    assert math.copysign(1, number) == 1 or expected < 0


@pytest.mark.parametrize(
    "value",
    [
        *NOT_NUMBERS,
        *NOT_FINITE,
        11,
        10.000001,
        HUGE,
        -HUGE,
        Fraction(10**400, 3),
        Decimal("1e999999"),
        Decimal("-1e999999"),
    ],
    ids=_id,
)
def test_check_real_refuses_what_is_not_a_number_in_range(value: object) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_real("v", value, -10, 10)
    assert str(raised.value).startswith("v: ")


def test_check_real_refuses_what_a_double_cannot_hold() -> None:
    for value in (10**400, -(10**400), Decimal("1e400"), Fraction(10**400, 3)):
        with pytest.raises(InvalidInput, match="double"):
            check_real("v", value)
    assert check_real("v", 1e308) == 1e308
    assert check_real("v", -(2**1000)) == -float(2**1000)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (7, 7),
        (-7, -7),
        (2.0, 2),
        (Fraction(4, 2), 2),
        (Decimal("2"), 2),
        (Decimal("2.00"), 2),
        (Decimal("1E+1"), 10),
        (MAX_INT, MAX_INT),
        (-MAX_INT, -MAX_INT),
    ],
)
def test_check_integer_takes_whole_numbers_of_any_kind(value: object, expected: int) -> None:
    whole = check_integer("count", value)
    assert whole == expected
    assert type(whole) is int


@pytest.mark.parametrize(
    "value",
    [
        *NOT_NUMBERS,
        *NOT_FINITE,
        1.5,
        Fraction(1, 3),
        Decimal("0.5"),
        MAX_INT + 1,
        -MAX_INT - 1,
        HUGE,
        Fraction(10**400, 3),
        Decimal("1e999999"),
        1e300,
    ],
    ids=_id,
)
def test_check_integer_refuses_the_rest(value: object) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_integer("count", value)
    assert str(raised.value).startswith("count: ")
    assert len(str(raised.value)) < 200


def _finite(value: Any) -> bool:
    if isinstance(value, Decimal):
        return value.is_finite()
    return not isinstance(value, float) or math.isfinite(value)


@given(st.one_of(st.integers(), st.floats(), st.fractions(), st.decimals()))
def test_numbers_are_kept_exactly_or_refused(value: Any) -> None:
    whole = _finite(value) and -100 <= value <= 100 and value == int(value)
    try:
        assert check_integer("count", value, -100, 100) == value
    except InvalidInput:
        assert not whole
    else:
        assert whole
    inside = _finite(value) and -1e9 <= value <= 1e9
    try:
        assert check_real("v", value, -1e9, 1e9) == float(value)
    except InvalidInput:
        assert not inside
    else:
        assert inside


def test_check_limit_takes_only_ints() -> None:
    assert check_limit("n", 0) == 0
    assert check_limit("n", 5, 1, 5) == 5
    for value in (-1, 6, 5.0, True, Decimal(5), "5", None, HUGE):
        with pytest.raises(InvalidInput, match="n: must be an int >= "):
            check_limit("n", value, 0, 5)
    with pytest.raises(InvalidInput, match=r"n: must be an int >= 1 \(got"):
        check_limit("n", MAX_INT + 1, 1)


def test_check_time_is_seconds_since_the_epoch() -> None:
    assert check_time("now", 1_700_000_000) == 1_700_000_000.0
    assert check_time("now", Decimal("1700000000.5")) == 1_700_000_000.5
    assert check_time("now", Fraction(7, 2)) == 3.5
    for value in (-1, MAX_TIME, 10**400, HUGE, Decimal("sNaN"), math.nan, True, "now"):
        with pytest.raises(InvalidInput, match=r"now: must be seconds since the epoch"):
            check_time("now", value)


# -- lists and ids -----------------------------------------------------------------------------


def test_check_list_refuses_text_and_what_is_not_iterable() -> None:
    assert check_list("names", ["a", "b"]) == ["a", "b"]
    assert check_list("names", iter(("a",))) == ["a"]
    assert sorted(check_list("names", {"a", "b"})) == ["a", "b"]  # type: ignore[type-var]
    for value in ("views:/", b"ab", bytearray(b"ab"), 5, None, 1.5):
        with pytest.raises(InvalidInput, match="names: must be a list"):
            check_list("names", value)


def test_check_names_checks_every_member() -> None:
    assert check_names("names", ("a", "{b}")) == ["a", "{b}"]
    for bad in (["a", ""], ["a", 5], ["a\n"], [HUGE]):
        with pytest.raises(InvalidInput, match="names: "):
            check_names("names", bad)


def test_int_ids_are_limited_like_names() -> None:
    assert check_int_id("row_id", 42) == "42"
    assert check_int_id("row_id", -(10 ** (MAX_NAME_BYTES - 2))) == "-1" + "0" * (
        MAX_NAME_BYTES - 2
    )
    assert len(check_int_id("row_id", 10 ** (MAX_NAME_BYTES - 1))) == MAX_NAME_BYTES
    for value in (10**MAX_NAME_BYTES, -(10 ** (MAX_NAME_BYTES - 1)), HUGE, -HUGE):
        with pytest.raises(InvalidInput, match=f"longer than {MAX_NAME_BYTES}"):
            check_int_id("row_id", value)


def test_a_huge_int_in_an_error_is_shown_by_its_size() -> None:
    error = InvalidInput("n", "is wrong", HUGE)
    assert str(error) == f"n: is wrong (got an int of {HUGE.bit_length()} bits)"
    assert (
        str(InvalidInput("n", "is wrong", [HUGE]))
        == "n: is wrong (got a list that cannot be shown)"
    )
