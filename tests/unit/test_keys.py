"""Names from users can never reach another key or break the layout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from webtier._core.keys import MAX_NAME_BYTES, Keyspace, check_name, check_prefix, shard_of
from webtier.errors import ConfigError, InvalidInput

PRECISIONS = (1, 5, 60, 300, 3600, 18000, 86400)


@pytest.mark.parametrize(
    "name",
    [
        "hits:/home",
        "page /item/12?x=1",
        "ünïcödé ✓ 页面",
        "{}",
        "{tag}",
        "a}b{c",
        "known",
        "60:x",
        "x" * 200,
    ],
)
def test_ordinary_names_pass(name: str) -> None:
    assert check_name("name", name) == name


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "empty"),
        ("a\x00b", "control"),
        ("line\nbreak", "control"),
        ("tab\there", "control"),
        ("del\x7f", "control"),
        ("c1\x85", "control"),
        ("bad\udcff", "surrogate"),
        ("x" * (MAX_NAME_BYTES + 1), "longer"),
        ("é" * (MAX_NAME_BYTES // 2 + 1), "longer"),  # 2 bytes each in UTF-8
        ("x" * 10_240, "longer"),
        (b"bytes", "str"),
        (42, "str"),
        (None, "str"),
    ],
)
def test_bad_names_are_refused_with_a_clear_error(name: object, problem: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_name("name", name)
    assert problem in str(caught.value)
    assert str(caught.value).startswith("name: ")
    assert len(str(caught.value)) < 200  # a 10 KB name is not echoed whole


def test_a_name_at_the_limit_passes() -> None:
    assert check_name("name", "é" * (MAX_NAME_BYTES // 2))


def test_shards_are_stable_across_processes_and_versions() -> None:
    # crc32, not hash(): these values must never change, or counters move.
    assert [shard_of(n, 64) for n in ("hits:/home", "a", "ünï")] == [3, 3, 42]


def test_counter_keys_share_one_slot_whatever_the_name() -> None:
    space = Keyspace("webtier")
    for name in ["plain", "{other}", "x}{y", "{}", "{a}{b}"]:
        keys = space.counter(name, 64, PRECISIONS)
        slots = {key_slot(k.encode()) for k in (keys.route, keys.index, *keys.samples)}
        assert len(slots) == 1, name


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_two_names_never_share_a_key(a: str, b: str) -> None:
    space = Keyspace("p")
    try:
        check_name("a", a)
        check_name("b", b)
    except InvalidInput:
        return
    ka = space.counter(a, 64, PRECISIONS)
    kb = space.counter(b, 64, PRECISIONS)
    shared = set(ka.samples) & set(kb.samples)
    assert (a == b) == bool(shared)
    assert ka.index not in kb.samples
    assert kb.index not in ka.samples


@pytest.mark.parametrize("prefix", ["", "a{b}", "sp ace", "x" * 65, "ü"])
def test_bad_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(ConfigError):
        check_prefix(prefix)
