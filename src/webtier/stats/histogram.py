"""Log-linear histograms: percentiles within a bounded relative error, mergeable
by adding counts, with no samples kept.

Each power of two ``[2**k, 2**(k+1))`` is split into ``M`` buckets of equal
width (HdrHistogram's layout). A value is reported as its bucket's
representative ``2*L*U / (L+U)``, which is off by at most ``(U-L)/(U+L) <=
1/(2M+1)`` of the value for any value in ``[L, U)``; ``M`` is the smallest
that keeps this within the relative error asked for (25 buckets per power of
two for 2%: :func:`webtier.config.data.sub_buckets_for`, as the statistics'
settings decide it). Buckets are found with ``math.frexp``, which is exact, so every
process (and the Lua script) files a value in the same bucket.

Buckets are named by strings, as they are stored in a Redis hash: ``p<i>``
for positive values, ``n<i>`` for negative ones (by magnitude) and ``z`` for
zero, where ``i = exponent * M + sub-bucket`` may be negative. Two
histograms of the same ``M`` merge by adding their counts: a day's
percentiles come from its hours with the same error bound. The bound holds
for normal doubles (magnitudes from 2.2e-308); subnormals lose precision.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from webtier.errors import InvalidInput

ZERO = "z"


def bucket_of(value: float, sub_buckets: int) -> str:
    """The name of the bucket ``value`` (finite) falls in."""
    if value == 0:
        return ZERO
    # |value| = mantissa * 2**exponent, with mantissa in [0.5, 1)
    mantissa, exponent = math.frexp(abs(value))
    sub = min(int((2 * mantissa - 1) * sub_buckets), sub_buckets - 1)
    return f"{'p' if value > 0 else 'n'}{exponent * sub_buckets + sub}"


def _magnitude_bounds(index: int, sub_buckets: int) -> tuple[float, float]:
    exponent, sub = divmod(index, sub_buckets)
    low = math.ldexp(1 + sub / sub_buckets, exponent - 1)
    high = math.ldexp(1 + (sub + 1) / sub_buckets, exponent - 1)
    return low, high


def representative(bucket: str, sub_buckets: int) -> float:
    """The value reported for any value of ``bucket``."""
    if bucket == ZERO:
        return 0.0
    exponent, sub = divmod(int(bucket[1:]), sub_buckets)
    low, high = 1 + sub / sub_buckets, 1 + (sub + 1) / sub_buckets
    # Scaled after the division, so tiny values do not underflow to zero.
    middle = math.ldexp(2 * low * high / (low + high), exponent - 1)
    return middle if bucket[0] == "p" else -middle


def bounds(bucket: str, sub_buckets: int) -> tuple[float, float]:
    """``(lower, upper)`` of the values filed in ``bucket``."""
    if bucket == ZERO:
        return 0.0, 0.0
    low, high = _magnitude_bounds(int(bucket[1:]), sub_buckets)
    return (low, high) if bucket[0] == "p" else (-high, -low)


def _order(bucket: str) -> tuple[int, int]:
    """Sort key putting buckets in the order of their values."""
    if bucket == ZERO:
        return (0, 0)
    index = int(bucket[1:])
    return (1, index) if bucket[0] == "p" else (-1, -index)


def is_bucket(name: str) -> bool:
    if name == ZERO:
        return True
    head, digits = name[:1], name[1:].removeprefix("-")
    return head in ("p", "n") and digits.isdigit()


def rank(percent: float, count: int) -> int:
    """The 1-based rank of the ``percent`` percentile among ``count`` sorted
    values (nearest rank: the smallest value with at least ``percent`` % of
    the values at or below it). Computed on the decimal the caller wrote, so
    that 95 % of 100 values is rank 95, not 96."""
    exact = Fraction(repr(float(percent))) * count / 100
    return max(1, math.ceil(exact))


def check_percent(percent: object) -> float:
    if isinstance(percent, bool) or not isinstance(percent, int | float):
        raise InvalidInput("percent", "must be a number in [0, 100]", percent)
    if not 0 <= percent <= 100:  # also refuses NaN
        raise InvalidInput("percent", "must be in [0, 100]", percent)
    return float(percent)


@dataclass(frozen=True, slots=True)
class Histogram:
    """Counts per bucket; ``sub_buckets`` fixes the layout (and the error)."""

    sub_buckets: int
    counts: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, values: Iterable[float], sub_buckets: int) -> Histogram:
        counts: dict[str, int] = {}
        for value in values:
            bucket = bucket_of(value, sub_buckets)
            counts[bucket] = counts.get(bucket, 0) + 1
        return cls(sub_buckets, counts)

    @property
    def count(self) -> int:
        return sum(self.counts.values())

    @property
    def relative_error(self) -> float:
        """The most a percentile can be off, relative to the true value."""
        return 1 / (2 * self.sub_buckets + 1)

    def merge(self, other: Histogram) -> Histogram:
        if other.sub_buckets != self.sub_buckets:
            raise ValueError("histograms of different layouts do not merge")
        counts = dict(self.counts)
        for bucket, n in other.counts.items():
            counts[bucket] = counts.get(bucket, 0) + n
        return Histogram(self.sub_buckets, counts)

    def percentile(
        self, percent: float, low: float | None = None, high: float | None = None
    ) -> float | None:
        """The ``percent`` percentile (nearest rank), within
        :attr:`relative_error` of the exact one; ``None`` when empty. ``low``
        and ``high``, the exact minimum and maximum when known, tighten it."""
        wanted = rank(check_percent(percent), self.count) if self.counts else 0
        seen = 0
        for bucket in sorted(self.counts, key=_order):
            seen += self.counts[bucket]
            if seen >= wanted > 0:
                value = representative(bucket, self.sub_buckets)
                if low is not None:
                    value = max(value, low)
                if high is not None:
                    value = min(value, high)
                return value
        return None

    def bins(self) -> list[tuple[float, float, int]]:
        """``(lower, upper, count)`` per non-empty bucket, lowest values first."""
        return [
            (*bounds(bucket, self.sub_buckets), self.counts[bucket])
            for bucket in sorted(self.counts, key=_order)
            if self.counts[bucket]
        ]
