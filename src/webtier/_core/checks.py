"""Checks of the numbers users pass, shared by every operation.

Names, ids and lists of names are checked in :mod:`webtier._core.keys`, next to
the keys they become; settings in :mod:`webtier.config`. Every check here
raises :class:`~webtier.errors.InvalidInput` (naming the argument) or
returns a plain ``int`` or ``float``, so no other error can come out of a
number, whatever its type:

* a bool is never a number (``True`` is not a count of 1);
* ``int``, ``float``, ``Fraction`` and ``Decimal`` (any ``numbers.Real``)
  are compared with their bounds exactly, before any conversion, so a huge
  int, a ``Fraction`` beyond a double or ``Decimal("1e999999")`` is refused
  rather than overflowing, and NaN, infinities and Decimal's signalling NaN
  are refused rather than compared;
* what is kept is converted only once it is known to fit.
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from typing import Any, Final

from webtier.errors import InvalidInput

# Whole numbers users pass (counts, limits) stay within 2**53: exact in a
# double, so in Lua scripts and in JSON, and far from 64-bit overflow.
MAX_INT: Final = 2**53
# Timestamps: seconds since the epoch, from 1970 to the year 2514.
MAX_TIME: Final = 2**34

Number = numbers.Real | Decimal


def _number(field: str, value: object, what: str) -> Number:
    """``value`` if it is a finite real number, else InvalidInput."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        raise InvalidInput(field, f"must be {what}, not {type(value).__name__}", value)
    if isinstance(value, Decimal):
        finite = value.is_finite()
    elif isinstance(value, numbers.Rational):
        finite = True  # int, Fraction: never NaN nor infinite, however large
    else:
        try:
            finite = math.isfinite(value)
        except OverflowError:  # a real type of its own, beyond a double
            finite = True
    if not finite:
        raise InvalidInput(field, f"must be {what}, and finite", value)
    return value


def _show(bound: float) -> str:
    if bound == MAX_INT:
        return "2**53"
    if bound == -MAX_INT:
        return "-2**53"
    return str(bound) if isinstance(bound, int) else f"{bound:.15g}"


def _within(field: str, number: Any, low: float, high: float, what: str) -> None:
    # Any: typeshed's numbers.Real does not declare comparisons with floats.
    try:
        inside = low <= number <= high  # exact for int, float, Fraction and Decimal
    except (TypeError, ValueError, ArithmeticError):
        inside = False
    if not inside:
        if low == -math.inf:
            bounds = f"at most {_show(high)}"
        elif high == math.inf:
            bounds = f"at least {_show(low)}"
        else:
            bounds = f"in [{_show(low)}, {_show(high)}]"
        raise InvalidInput(field, f"must be {what}, {bounds}", number)


def check_real(
    field: str,
    value: object,
    low: float = -math.inf,
    high: float = math.inf,
    what: str = "a number",
) -> float:
    """``value`` as a finite float within ``[low, high]``: int, float,
    Fraction or Decimal; not a bool, NaN, an infinity, or beyond a double."""
    number = _number(field, value, what)
    _within(field, number, low, high, what)
    try:
        result = float(number)
    except (OverflowError, ValueError, TypeError):
        result = math.inf
    if not math.isfinite(result):  # float(Decimal("1e400")) is inf, not an error
        raise InvalidInput(field, f"must be {what}, and fit in a double", value)
    return result + 0.0  # -0.0 becomes 0.0


def _whole(number: Number) -> int | None:
    """``number`` as an int if it is whole (it is known to be finite and small)."""
    if isinstance(number, numbers.Integral):
        return int(number)
    if isinstance(number, Decimal):
        return int(number) if number == number.to_integral_value() else None
    if isinstance(number, numbers.Rational):
        return int(number.numerator) if number.denominator == 1 else None
    real = float(number)
    return int(real) if real.is_integer() else None


def check_integer(field: str, value: object, low: int = -MAX_INT, high: int = MAX_INT) -> int:
    """``value`` as an int within ``[low, high]``: an int, or a whole float,
    Fraction or Decimal (``2.0``, ``Fraction(4, 2)``, ``Decimal("2")``)."""
    # The common case first, before the ABC checks (3 µs a call): an exact
    # int (bool is not one) within the bounds is returned as it is.
    if type(value) is int and low <= value <= high:
        return value
    number = _number(field, value, "an integer")
    _within(field, number, low, high, "an integer")
    whole = _whole(number)
    if whole is None:
        raise InvalidInput(field, "must be a whole number", value)
    return whole


def check_limit(field: str, value: object, low: int = 0, high: int = MAX_INT) -> int:
    """``value`` if it is an int within ``[low, high]``: how many to return,
    keep or take at once. Only ints: ``10.0`` items is a mistake."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        most = "" if high == MAX_INT else f" and <= {high}"
        raise InvalidInput(field, f"must be an int >= {low}{most}", value)
    return value


def check_time(field: str, value: object) -> float:
    """Seconds since the epoch, in ``[0, 2**34)``, as a float."""
    # The common case first, before the ABC checks: a float or an exact int
    # in range (NaN is not; + 0.0 turns -0.0 into 0.0, as below).
    if (type(value) is float or type(value) is int) and 0 <= value < MAX_TIME:
        return float(value) + 0.0
    what = "seconds since the epoch"
    number: Any = _number(field, value, what)
    try:
        inside = 0 <= number < MAX_TIME
    except (TypeError, ValueError, ArithmeticError):
        inside = False
    if not inside:
        raise InvalidInput(field, f"must be {what} in [0, 2**34)", value)
    return float(number) + 0.0
