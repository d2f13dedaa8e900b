"""The shared checks of user input, and the escapes of issue #12 they close."""

from __future__ import annotations

import math
import uuid
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webtier import book, counters, pagecache, ranking, rows, sessions, stats
from webtier._core.checks import (
    MAX_INT,
    MAX_TIME,
    check_integer,
    check_limit,
    check_real,
    check_time,
)
from webtier._core.flush import Flusher
from webtier._core.keys import MAX_NAME_BYTES, check_int_id, check_list, check_names
from webtier.config import Config
from webtier.counters.tally import Tally
from webtier.errors import ConfigError, InvalidInput, WebtierError
from webtier.rows.source import FunctionSource, check_source

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
    assert type(check_time("now", 1_700_000_000)) is float
    assert math.copysign(1, check_time("now", -0.0)) == 1  # -0.0 is 0.0
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


def test_sources_are_checked() -> None:
    assert check_source(SOURCE) is SOURCE
    for value in ("src", None, 5):
        with pytest.raises(InvalidInput, match="source: must be a row source"):
            check_source(value)


def test_a_huge_int_in_an_error_is_shown_by_its_size() -> None:
    error = InvalidInput("n", "is wrong", HUGE)
    assert str(error) == f"n: is wrong (got an int of {HUGE.bit_length()} bits)"
    assert (
        str(InvalidInput("n", "is wrong", [HUGE]))
        == "n: is wrong (got a list that cannot be shown)"
    )


# -- the escapes of issue #12, at each operation ---------------------------------------------


def test_counters_refuse_what_they_cannot_hold() -> None:
    assert "now" in str(refused(counters.ops.record(CFG, "a", 1, now=10**400)))
    assert "count" in str(refused(counters.ops.record(CFG, "a", Fraction(10**400, 3))))
    assert "count" in str(refused(counters.ops.record(CFG, "a", HUGE)))
    assert "name" in str(refused(counters.ops.record(CFG, HUGE)))  # type: ignore[arg-type]
    assert "prefix" in str(refused(counters.ops.names(CFG, 1)))  # type: ignore[arg-type]
    assert "precision" in str(refused(counters.ops.get(CFG, "a", Decimal("sNaN"))))  # type: ignore[arg-type]
    assert "start" in str(refused(counters.ops.get(CFG, "a", 60, start="x")))  # type: ignore[arg-type]
    assert "pass_number" in str(refused(counters.ops.clean(CFG, Decimal("sNaN"))))  # type: ignore[arg-type]
    assert "batch" in str(refused(counters.ops.clean(CFG, 0, None, HUGE)))
    assert "batch" in str(refused(counters.ops.clean(CFG, 0, None, 1.5)))  # type: ignore[arg-type]


def test_counters_take_whole_numbers_of_every_kind() -> None:
    for count in (2, 2.0, Fraction(4, 2), Decimal("2")):
        request = next(counters.ops.record(CFG, "a", count, now=Decimal(1000)))  # type: ignore[arg-type]
        assert request.commands[0].args[1:3] == ("a", 2)  # type: ignore[union-attr]
    (request,) = next(counters.ops.get(CFG, "a", 60.0))  # type: ignore[arg-type, misc]
    assert request.commands == (("HGETALL", "p:{c:3}:60:a"),)


def test_a_str_where_a_list_of_names_is_expected_is_refused_not_split() -> None:
    assert "names" in str(refused(counters.ops.get_many(CFG, "views:/", 5)))
    assert "names" in str(refused(counters.ops.get_many(CFG, 5, 5)))  # type: ignore[arg-type]
    assert "contexts" in str(refused(stats.ops.get_many(CFG, "ab", "x")))
    assert "row_ids" in str(refused(rows.ops.get_many(CFG, SOURCE, "12")))
    assert "sources" in str(refused(rows_refresh_due("inventory")))


def rows_refresh_due(sources: object) -> Any:

    return rows.refresh.refresh_due(CFG, sources)  # type: ignore[arg-type]


def test_stats_values_must_be_finite_doubles() -> None:
    assert "value" in str(refused(stats.ops.record(CFG, "ctx", "x", 10**400)))
    assert "value" in str(refused(stats.ops.record(CFG, "ctx", "x", Decimal("sNaN"))))  # type: ignore[arg-type]
    assert "value" in str(refused(stats.ops.record(CFG, "ctx", "x", Fraction(10**400, 3))))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "op", [rows.ops.get, rows.ops.invalidate, rows.ops.refresh_now, rows.ops.unschedule]
)
def test_integer_row_ids_are_limited_like_names(op: Any) -> None:
    for row_id in (HUGE, 10**1100):
        assert "row_id" in str(refused(op(CFG, SOURCE, row_id)))
    assert "row_id" in str(refused(rows.ops.get(CFG, SOURCE, 10**1100, load=True)))
    assert "row_id" in str(refused(rows.ops.schedule(CFG, SOURCE, HUGE, 5)))
    assert "row_id" in str(refused(rows.ops.get_many(CFG, SOURCE, [1, HUGE])))


def test_rows_refuse_what_is_not_a_source_or_a_delay() -> None:
    assert "source" in str(refused(rows.ops.get(CFG, "src", 1)))  # type: ignore[arg-type]
    assert "source" in str(refused(rows.ops.status(CFG, "src")))  # type: ignore[arg-type]
    assert "source" in str(refused(rows_refresh_due(["src"])))
    for delay in (10**400, -(10**400), Decimal("sNaN"), -math.inf):
        assert "delay" in str(refused(rows.ops.schedule(CFG, SOURCE, 1, delay)))  # type: ignore[arg-type]
    request = next(rows.ops.schedule(CFG, SOURCE, 1, Decimal("1.5")))  # type: ignore[arg-type]
    assert request.commands[0].args == ("1", 1500)  # type: ignore[union-attr]


def test_limits_are_ints_redis_can_take() -> None:
    for n in (HUGE, 2**64, 1.5, True):
        assert "n" in str(refused(ranking.ops.top(CFG, n)))  # type: ignore[arg-type]
    assert "n" in str(refused(stats.ops.slowest(CFG, HUGE)))


def test_cart_counts_are_whole_numbers_redis_can_take() -> None:
    token = "t" * 43
    for count in (-HUGE, HUGE, 1.5, Decimal("sNaN"), "1"):
        assert "count" in str(refused(sessions.carts.set(CFG, token, "a", count)))  # type: ignore[arg-type]
    request = next(sessions.carts.set(CFG, token, "a", Decimal("2")))  # type: ignore[arg-type]
    assert request[0].commands[0].args[:2] == ("a", 2)  # type: ignore[union-attr]


def test_page_cache_refuses_what_is_not_a_url_plan_or_call() -> None:
    assert "url" in str(refused(pagecache.invalidation.invalidate(CFG, "http://[")))
    assert "url" in str(refused(pagecache.invalidation.invalidate(CFG, 5)))  # type: ignore[arg-type]
    assert "url" in str(refused(pagecache.invalidation.invalidate(CFG, "/x\ud800?item=a")))
    assert "headers" in str(refused(pagecache.invalidation.invalidate(CFG, "/?item=a", "x")))  # type: ignore[arg-type]
    assert "headers" in str(refused(pagecache.invalidation.invalidate(CFG, "/?item=a", {"a": 1})))  # type: ignore[dict-item]
    assert "rules" in str(refused(pagecache.invalidation.invalidate(CFG, "/?item=a", None, 5)))  # type: ignore[arg-type]
    assert "plan" in str(refused(pagecache.ops.serve(CFG, "plan", "render")))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "settings",
    [
        {"flush_interval": "x"},
        {"flush_interval": Decimal("sNaN")},
        {"flush_interval": 10**400},
        {"flush_interval": Decimal("0.5")},
        {"max_pending": "x"},
        {"max_pending": 0},
    ],
)
def test_recorder_settings_are_refused_with_a_config_error(settings: dict[str, Any]) -> None:
    values = {"flush_interval": 0.1, "max_pending": 10, **settings}
    with pytest.raises(ConfigError):
        Flusher(CFG, values["flush_interval"], values["max_pending"], _Event())


class _Event:
    def set(self) -> None:
        pass


def test_book_tier_for_refuses_what_is_not_a_client() -> None:
    for conn in (5, None, "redis://x", uuid.uuid4()):
        with pytest.raises(ConfigError, match="redis-py client"):
            book.tier_for(conn)


def test_tally_refuses_like_record() -> None:
    tally = Tally(1, 100, lambda: None)
    for args in (("a", HUGE), ("a", 1, 10**400), (HUGE,), ("a", Decimal("sNaN"))):
        with pytest.raises(WebtierError):
            tally.add(*args)


def test_session_data_too_deep_for_json_is_refused() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(InvalidInput, match="not JSON"):
        next(sessions.ops.update(CFG, "t" * 43, {"a": deep}))
