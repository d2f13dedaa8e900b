"""Session and cart operations, fed replies by hand."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import random
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.ops import drive, sampled_pick
from webtier import ranking, sessions
from webtier._core.keys import shard_of
from webtier._core.protocol import Chain, ScriptCall
from webtier.config import Config, SessionSettings
from webtier.errors import (
    BadToken,
    CartLimit,
    ConfigError,
    DataTooLarge,
    InvalidInput,
    OutcomeUnknown,
    PartiallyApplied,
    RedisUnavailable,
    UnknownSession,
    UserMismatch,
)
from webtier.ranking.views import ViewCounter
from webtier.sessions.tokens import check_token, is_token, new_token
from webtier.types import CartChange

CFG = Config(prefix="p", sessions=SessionSettings(shards=4, clean_batch=4))
TOKEN = "A" * 43


def test_tokens_have_256_bits_and_a_strict_form() -> None:
    token = new_token()
    assert len(token) == 43
    assert is_token(token)
    assert new_token() != token
    assert is_token(str(uuid.uuid4()), strict=False)
    assert not is_token(str(uuid.uuid4()))
    for bad in ("", "a" * 42, "a" * 44, "a" * 42 + "/", "a" * 42 + "{", None, b"a" * 43):
        assert not is_token(bad)
        with pytest.raises(BadToken):
            check_token(bad)


def test_a_session_lives_in_its_tokens_shard() -> None:
    where = sessions.layout.place(CFG, TOKEN)
    shard = shard_of(TOKEN, 4)
    assert where.route == f"p:{{s:{shard}}}"
    assert where.key == f"p:{{s:{shard}}}:t:{TOKEN}"
    assert where.recent == f"p:{{s:{shard}}}:recent"


def test_touch_lists_the_user_first_and_counts_the_view_in_its_script_on_one_server() -> None:
    views = ViewCounter(CFG, one_node=True)
    op = sessions.ops.touch(CFG, TOKEN, user="alice", item="42", views=views)
    chain = next(op)
    assert isinstance(chain, Chain)
    index, script, upkeep = chain.requests  # the first view of a process carries the upkeep
    assert index.commands[0] == ("HSET", f"p:{{u:{shard_of('alice', 4)}}}:alice", TOKEN, "")
    assert not script.idempotent
    (call,) = script.commands
    assert isinstance(call, ScriptCall)
    assert call.script is sessions.layout.TOUCH
    where = sessions.layout.place(CFG, TOKEN)
    assert call.keys == (where.key, where.recent, "p:{v}:viewed")  # the view, in the script
    assert call.args[:6] == (TOKEN, "live", "", "alice", "42", 25)
    assert upkeep == ranking.ops.upkeep_request(CFG, ranking.ops.shard_for(CFG, "42"))
    assert (
        drive(op, [[[1, 1], [[1, b"alice", b"1700000000000000"]], [0]]], started=True).value is True
    )
    # The next view of the process goes without the upkeep.
    assert len(next(sessions.ops.touch(CFG, TOKEN, item="42", views=views)).requests) == 1


def test_touch_on_cluster_counts_the_view_only_once_the_session_is_live() -> None:
    views = ViewCounter(CFG, one_node=False)
    op = sessions.ops.touch(CFG, TOKEN, item="42", views=views)
    (script,) = next(op).requests
    assert len(script.commands[0].keys) == 2  # no ranking key: another slot
    (view,) = op.send([[[1, b"", b"1700000000000000"]]])
    assert view.commands[0] == ("ZINCRBY", "p:{v}:viewed", 1, "42")
    assert drive(op, [[[1.0, 0]]], started=True).value is True
    # A session that does not exist counts no view.
    op = sessions.ops.touch(CFG, TOKEN, item="42", views=views)
    next(op)
    assert drive(op, [[[[0]]]], started=True).value is False


@pytest.mark.parametrize(
    ("error", "not_applied", "unknown"),
    [(RedisUnavailable("down"), ("view",), ()), (OutcomeUnknown("lost"), (), ("view",))],
)
def test_a_view_lost_after_the_touch_is_reported_as_partly_applied(
    error: RedisUnavailable, not_applied: tuple[str, ...], unknown: tuple[str, ...]
) -> None:
    op = sessions.ops.touch(CFG, TOKEN, item="42", views=ViewCounter(CFG, one_node=False))
    next(op)
    op.send([[[1, b"", b"1700000000000000"]]])
    with pytest.raises(PartiallyApplied) as raised:
        op.throw(error)
    assert (raised.value.applied, raised.value.not_applied) == (("session",), not_applied)
    assert raised.value.unknown == unknown
    assert raised.value.__cause__ is error
    assert "touch was cut off midway; applied: session" in str(raised.value)


def test_touch_counts_in_the_aggregator_once_the_session_is_live() -> None:
    counted: list[str] = []

    class Aggregator:
        def incr(self, item: str) -> None:
            counted.append(item)

    views = ViewCounter(CFG, one_node=True)
    views.aggregator = Aggregator()  # type: ignore[assignment]
    op = sessions.ops.touch(CFG, TOKEN, item="42", views=views)
    (script,) = next(op).requests
    assert len(script.commands[0].keys) == 2
    assert drive(op, [[[[1, b"", b"1700000000000000"]]]], started=True).value is True
    assert counted == ["42"]
    op = sessions.ops.touch(CFG, TOKEN, item="43", views=views)
    next(op)
    assert drive(op, [[[[0]]]], started=True).value is False
    assert counted == ["42"]


def test_a_touch_refused_for_another_user_raises() -> None:
    op = sessions.ops.touch(CFG, TOKEN, user="bob")
    next(op)
    with pytest.raises(UserMismatch):
        op.send([[1, 1], [[-1, b"alice"]]])


def test_bad_arguments_are_refused_before_anything_is_sent() -> None:
    for op in (
        sessions.ops.touch(CFG, TOKEN, item=""),
        sessions.ops.touch(CFG, TOKEN, user="a\nb"),
        sessions.users.login(CFG, TOKEN, "alice", cart_policy="merge"),
        sessions.ops.update(CFG, TOKEN, {"a": {1, 2}}),
        sessions.ops.update(CFG, TOKEN, ["a"]),  # type: ignore[arg-type]
        sessions.cleaner.clean(CFG, keep=-1),
        sessions.users.revoke(CFG, "alice", 42),  # type: ignore[arg-type]
        sessions.carts.set(CFG, TOKEN, "a", True),
        sessions.carts.set(CFG, TOKEN, "a", 1001),
        sessions.carts.set(CFG, TOKEN, "", 1),
    ):
        with pytest.raises(InvalidInput):
            next(op)


def test_data_values_over_the_limit_are_refused_with_a_clear_error() -> None:
    cfg = Config(sessions=SessionSettings(max_value_bytes=8, max_data_bytes=8))
    with pytest.raises(DataTooLarge, match="over 8 bytes"):
        next(sessions.ops.update(cfg, TOKEN, {"a": "123456789"}))
    op = sessions.ops.update(cfg, TOKEN, {"a": "é"})
    request = next(op)
    assert request[0].commands[0].args == (64, 8, "a", '"é"')
    with pytest.raises(DataTooLarge, match="3 fields"):
        op.send([[[-1, 3, 9]]])


def test_update_of_a_missing_session_raises() -> None:
    op = sessions.ops.update(CFG, TOKEN, {"a": 1})
    next(op)
    with pytest.raises(UnknownSession):
        op.send([[[0]]])


def test_cart_replies_become_errors() -> None:
    op = sessions.carts.set(CFG, TOKEN, "a", 1)
    next(op)
    with pytest.raises(CartLimit):
        op.send([[[-1, 50]]])
    op = sessions.carts.set(CFG, TOKEN, "a", 1)
    next(op)
    with pytest.raises(UnknownSession):
        op.send([[[0]]])


def test_carts_and_viewed_items_are_read_from_the_session_hash() -> None:
    fields = [b"u", b"x", b"khat", b"2", b"va", b"3", b"vb", b"5", b"dx", b"1", b"n", b"5"]
    assert drive(sessions.carts.get(CFG, TOKEN), [[fields]]).value == {"hat": 2}
    assert drive(sessions.ops.recently_viewed(CFG, TOKEN), [[fields]]).value == ["b", "a"]
    assert drive(sessions.ops.data(CFG, TOKEN), [[fields]]).value == {"x": 1}
    assert drive(sessions.ops.data(CFG, TOKEN), [[{}]]).value == {}


def test_info_reads_one_slot_and_none_means_no_session() -> None:
    session = drive(
        sessions.ops.info(CFG, TOKEN), [[[b"1700000000000", b"sid", None], b"1700000001000000"]]
    ).value
    assert (session.id, session.user, session.created, session.last_seen) == (
        "sid", None, 1_700_000_000.0, 1_700_000_001.0,
    )  # fmt: skip
    assert drive(sessions.ops.info(CFG, TOKEN), [[[None, None, None], None]]).value is None


@pytest.mark.parametrize(
    ("policy", "merged"),
    [
        ("add", {"a": 3, "b": 1, "c": 5}),
        ("replace", {"a": 2, "c": 5}),
        ("keep_larger", {"a": 2, "b": 1, "c": 5}),
    ],
)
def test_cart_merge_policies(policy: str, merged: dict[str, int]) -> None:
    result, changes = sessions.users.merge_carts(
        {"a": 1, "b": 1}, {"a": 2, "c": 5}, policy, 50, 1000
    )
    assert result == merged
    before = {"a": 1, "b": 1}
    assert changes == tuple(
        CartChange(item, before.get(item, 0), merged.get(item, 0))
        for item in sorted({*before, *merged})
        if before.get(item, 0) != merged.get(item, 0)
    )


def test_cart_merge_respects_the_limits() -> None:
    result, changes = sessions.users.merge_carts({"a": 9, "b": 1}, {"a": 9, "c": 1}, "add", 2, 10)
    assert result == {"a": 10, "c": 1}
    assert changes == (CartChange("a", 9, 10), CartChange("b", 1, 0), CartChange("c", 0, 1))
    assert sessions.users.merge_carts({"a": 1}, {}, "replace", 5, 5) == ({"a": 1}, ())


def test_the_cleaner_chooses_only_the_oldest_of_all_shards() -> None:
    cfg = Config(prefix="p", sessions=SessionSettings(shards=2, clean_batch=2))
    age = 30 * 86400 * 10**6  # the backstop, in µs
    op = sessions.cleaner.clean(cfg, keep=3)
    picks = next(op)
    assert [(r.route, r.commands[0].keys, r.commands[0].args) for r in picks] == [
        ("p:{s:0}", ("p:{s:0}:recent",), (age, 2, "sample")),
        ("p:{s:1}", ("p:{s:1}:recent",), (age, 2, "sample")),
    ]
    t = 1_700_000_000_000_000
    cutoff = t - age
    # Shard 0 holds 4 (its page of 2 is full, up to t-10), shard 1 holds 2.
    # Six sessions, three over the limit, two a step. Every session scoring
    # up to t-20 goes: at most 1 in shard 0 (its next sample is t-10, at
    # rank 1), 1 in shard 1.
    sampled = [[cutoff, 4, 0, 0, t - 50, 1, t - 10], [cutoff, 2, 0, 0, t - 20, 1, t - 5]]
    calls = op.send([[reply] for reply in sampled])
    assert [(r.route, r.commands[0].keys, r.commands[0].args) for r in calls] == [
        ("p:{s:0}", ("p:{s:0}:recent", "p:{s:0}:t:"), (t - 20, 1)),
        ("p:{s:1}", ("p:{s:1}:recent", "p:{s:1}:t:"), (t - 20, 1)),
    ]
    # Shard 1's session was touched meanwhile: spared.
    final = op.send([[1], [0]])
    assert final[0].commands[0].script is sessions.layout.PICK
    # Now 3 are left: at the limit, done.
    done = [[cutoff, 2, 0, 0, t - 10, 1, t - 5], [cutoff, 1, 0, 0, t]]
    report = drive(op, [[[reply] for reply in done]], started=True).value
    assert (report.deleted, report.spared, report.remaining, report.steps) == (1, 1, 3, 1)


def test_a_threshold_never_passes_a_shards_own_highest_score() -> None:
    """On a Cluster, shards' scores come from their nodes' clocks: a bound
    from another shard's samples could pass a session touched after the
    pick on a node whose clock is behind. Each bound stays at or below a
    score the shard itself holds."""
    cfg = Config(prefix="p", sessions=SessionSettings(shards=2, clean_batch=100))
    op = sessions.cleaner.clean(cfg, keep=0)
    next(op)
    t = 1_700_000_000_000_000
    sampled = [[0, 2, 0, 0, t - 100, 1, t - 90], [0, 1, 0, 0, t - 1000]]
    calls = op.send([[reply] for reply in sampled])
    assert [r.commands[0].args for r in calls] == [(t - 90, 2), (t - 1000, 1)]


def test_a_threshold_stops_at_the_end_of_a_partial_page() -> None:
    """Shard 0 holds 70, its page of 63 sampled; shard 1 holds 20, all
    newer than shard 0's last sample. Up to shard 1's newest would fit the
    count (70 + 20), but shard 0's 7 unseen sessions may be older than shard
    1's: only up to shard 0's last sample is surely the oldest."""
    cfg = Config(prefix="p", sessions=SessionSettings(shards=2, clean_batch=100))
    op = sessions.cleaner.clean(cfg, keep=0)
    (pick, _) = next(op)
    assert pick.commands[0].args[1] == 63
    t = 1_700_000_000_000_000

    def sampled(card: int, ranks: list[int], base: int) -> list[Any]:
        return [0, card, 0, *(x for rank in ranks for x in (rank, base + rank))]

    picks = [
        sampled(70, [0, 1, 2, 3, 4, 6, 9, 13, 19, 28, 42, 62], t - 1000),
        sampled(20, [0, 1, 2, 3, 4, 6, 9, 13, 19], t - 500),
    ]
    calls = op.send([[reply] for reply in picks])
    assert [(r.route, r.commands[0].args) for r in calls] == [("p:{s:0}", (t - 1000 + 62, 70))]


def test_tied_samples_make_the_cleaner_read_whole_pages() -> None:
    cfg = Config(prefix="p", sessions=SessionSettings(shards=2, clean_batch=2))
    op = sessions.cleaner.clean(cfg, keep=3)
    next(op)
    t = 1_700_000_000_000_000
    # One over the limit, and both shards' oldest score t-50: any threshold
    # may take two. Whole pages settle the tie in shard order.
    sampled = [[0, 2, 0, 0, t - 50, 1, t - 10], [0, 2, 0, 0, t - 50, 1, t - 5]]
    pages = op.send([[reply] for reply in sampled])
    assert [r.commands[0].args[2] for r in pages] == ["all", "all"]
    (call,) = op.send([[[0, 2, 0, t - 50, t - 10]], [[0, 2, 0, t - 50, t - 5]]])
    assert (call.route, call.commands[0].args) == ("p:{s:0}", (t - 50, 1))
    op.send([[1]])
    done = [[0, 1, 0, 0, t - 10], [0, 2, 0, 0, t - 50, 1, t - 5]]
    report = drive(op, [[[reply] for reply in done]], started=True).value
    assert (report.deleted, report.remaining, report.steps) == (1, 3, 1)


def test_the_cleaner_removes_by_a_threshold_when_samples_suffice() -> None:
    cfg = Config(prefix="p", sessions=SessionSettings(shards=2, clean_batch=100))
    op = sessions.cleaner.clean(cfg, keep=5)
    next(op)
    t = 1_700_000_000_000_000
    # 13 sessions, 8 over the limit. Shard 0 is sampled at ranks 0-4, 6, 9.
    # Up to t-60 could be 9 + 1, too many; up to t-95 at most 6 + 1 (the
    # first samples above it are at ranks 6 and 1), at least 5 + 1.
    sampled = [
        [0, 10, 0, 0, t - 100, 1, t - 99, 2, t - 98, 3, t - 97, 4, t - 96, 6, t - 60, 9, t - 10],
        [0, 3, 0, 0, t - 95, 1, t - 50, 2, t - 5],
    ]
    calls = op.send([[reply] for reply in sampled])
    assert [r.commands[0].args for r in calls] == [(t - 95, 6), (t - 95, 1)]
    op.send([[5], [1]])
    done = [[0, 4, 0, 0, t - 60], [0, 1, 0, 0, t - 50]]
    report = drive(op, [[[reply] for reply in done]], started=True).value
    assert (report.deleted, report.spared, report.remaining, report.steps) == (6, 0, 5, 1)


def test_the_cleaner_removes_sessions_idle_past_the_timeout() -> None:
    cfg = Config(prefix="p", sessions=SessionSettings(shards=1, idle_timeout=60))
    op = sessions.cleaner.clean(cfg)
    (pick,) = next(op)
    assert pick.commands[0].args == (60 * 10**6, 6250, "sample")
    cutoff = 1_700_000_000 * 10**6
    stale = [cutoff, 2, 1, 0, cutoff - 10**6, 1, cutoff + 10**6]
    (call,) = op.send([[stale]])
    assert call.commands[0].args == (f"({cutoff}", 1)
    op.send([[1]])
    report = drive(op, [[[[cutoff, 1, 0, 0, cutoff + 10**6]]]], started=True).value
    assert (report.deleted, report.remaining) == (1, 1)


@pytest.mark.parametrize(
    "settings",
    [
        {"limit": -1},
        {"shards": 0},
        {"viewed": 1001},
        {"idle_timeout": -1},
        {"backstop": 0},
        {"strict": 1},
        {"clean_batch": 0},
        {"max_value_bytes": 10, "max_data_bytes": 5},
        {"cart_count": 0},
    ],
)
def test_bad_settings_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        SessionSettings(**settings)


def _choose_entry_by_entry(
    settings: SessionSettings, picks: list[Any], keep: int, per_shard: int
) -> dict[int, tuple[int, int, int]]:
    """The cleaner's choice from whole pages, written plainly: every entry a
    (score, shard)."""
    remaining, stale, fresh, horizon = 0, [], [], math.inf
    for shard, (cutoff, count, _, *page) in enumerate(picks):
        remaining += count
        for score in page:
            (stale if score < cutoff else fresh).append((score, shard))
        if len(page) == per_shard:
            horizon = min(horizon, page[-1])
    fresh = sorted(entry for entry in fresh if entry[0] <= horizon)
    over = max(0, remaining - len(stale) - keep)
    chosen: dict[int, tuple[int, int, int]] = {}
    for score, shard in (stale + fresh[:over])[: settings.clean_batch]:
        highest, n, _ = chosen.get(shard, (score, 0, 0))
        chosen[shard] = (max(highest, score), n + 1, n + 1)
    return chosen


def _random_shards(rng: random.Random, shards: int, most: int) -> list[list[int]]:
    """Each shard's scores, sorted: few distinct values, so ties across
    shards are common, and some stale (idle past 50 s, see below)."""
    now = 1_700_000_000
    return [
        sorted(
            (now - rng.choice([0, 10, 40, 50, 60, 90])) * 10**6 + rng.randint(0, 3)
            for _ in range(rng.randint(0, most))
        )
        for _ in range(shards)
    ]


CUTOFF = (1_700_000_000 - 50) * 10**6


@pytest.mark.parametrize("seed", range(300))
def test_the_cleaners_choice_matches_the_plain_one(seed: int) -> None:
    rng = random.Random(seed)
    shards, per_shard = rng.randint(1, 6), rng.randint(1, 8)
    settings = SessionSettings(shards=shards, clean_batch=rng.randint(1, 30))
    picks = []
    for stored in _random_shards(rng, shards, per_shard + 5):
        stale = sum(score < CUTOFF for score in stored)
        picks.append([CUTOFF, len(stored), stale, *stored[:per_shard]])
    keep = rng.randint(0, 25)
    wire = [[str(c).encode(), n, s, *(str(x).encode() for x in page)] for c, n, s, *page in picks]
    assert sessions.cleaner._choose(settings, wire, keep, per_shard) == _choose_entry_by_entry(
        settings, picks, keep, per_shard
    )


@pytest.mark.parametrize("seed", range(300))
def test_a_sampled_choice_takes_exactly_the_oldest_within_the_budget(seed: int) -> None:
    """Carried out on the shards' whole contents, a choice from samples
    removes every stale session or as many as the budget allows, otherwise
    a run of the oldest of all shards (everything up to a score, nothing
    above it), never more than may go, and at least half of it; or it
    declines (the caller then reads whole pages)."""
    rng = random.Random(seed)
    shards, page = rng.randint(1, 6), rng.randint(1, 40)
    settings = SessionSettings(shards=shards, clean_batch=rng.randint(1, 60))
    stored = _random_shards(rng, shards, rng.choice([5, 30, 80]))
    keep = rng.randint(0, 100)
    # Stale: none, those idle past 70 s, or past 50 s.
    cutoff = (1_700_000_000 - rng.choice([100, 70, 50])) * 10**6
    picks = [sampled_pick(scores, cutoff, page) for scores in stored]
    chosen = sessions.cleaner._choose_by_samples(settings, picks, keep)
    stale = sum(score < cutoff for scores in stored for score in scores)
    total = sum(map(len, stored))
    wanted = min(settings.clean_batch, max(stale, total - keep))
    if chosen is None:
        assert wanted > stale
        return
    removed: list[int] = []
    for shard, (bound, limit, least) in chosen.items():
        if isinstance(bound, str):
            assert bound == f"({cutoff}"
            gone = [score for score in stored[shard] if score < cutoff][:limit]
        else:
            assert bound <= max(stored[shard]), "never above a score of the shard's own"
            gone = [score for score in stored[shard] if score <= bound][:limit]
            assert len(gone) == sum(score <= bound for score in stored[shard]), "all up to it"
        assert least <= len(gone)
        removed += gone
    assert len(removed) <= wanted
    if wanted <= stale:
        assert len(removed) == wanted
        assert all(score < cutoff for score in removed)
        return
    assert len(removed) >= max(1, wanted // 2)
    kept = sorted(score for scores in stored for score in scores)
    for score in removed:
        kept.remove(score)
    assert sum(score < cutoff for score in kept) == 0, "every stale session goes"
    fresh_removed = [score for score in removed if score >= cutoff]
    if fresh_removed and kept:
        assert max(fresh_removed) < min(kept), "only the oldest of all shards"


def test_scores_in_any_form_redis_writes_are_read() -> None:
    assert sessions.cleaner._scores([b"1795556194154123", b"7"]) == [1795556194154123, 7]
    assert sessions.cleaner._scores([b"1.5e+15", b"7"]) == [1_500_000_000_000_000, 7]


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=10,
)


@given(JSON_VALUES)
def test_a_value_is_stored_as_jsons_compact_form_and_read_back(value: Any) -> None:
    # encode_value skips json.dumps for strings, ints and atoms: the same text.
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    assert sessions.ops.encode_value("k", value) == compact
    assert sessions.ops.data_of({"dk": compact.encode()}) == {"k": value}


def test_an_int_or_str_subclass_is_stored_as_its_value() -> None:
    class Level(enum.IntEnum):
        HIGH = 3

    class Name(str):
        __slots__ = ()

    assert sessions.ops.encode_value("k", Level.HIGH) == "3"
    assert sessions.ops.encode_value("k", Name('a"b')) == '"a\\"b"'
    with pytest.raises(InvalidInput):
        sessions.ops.encode_value("k", math.nan)


def test_a_load_that_always_touches_sends_the_hash_and_the_check_in_one_pipeline() -> None:
    hash_ = [b"c", b"1700000000000", b"dn", b"1"]
    op = sessions.ops.load(CFG, TOKEN, 0.0)
    (request,) = next(op)
    assert request.commands[0] == ("HGETALL", request.commands[1].keys[0])
    assert drive(op, [[[hash_, [1]]]], started=True).value == {"c": hash_[1], "dn": b"1"}
    # Deleted or moved between the two (a logout, a login): the check says so.
    assert drive(sessions.ops.load(CFG, TOKEN, 0.0), [[[hash_, [0]]]]).value is None
    # Created between the two: the hash read before it is no session.
    assert drive(sessions.ops.load(CFG, TOKEN, 0.0), [[[[], [1]]]]).value is None


NOW = [b"1700000100", b"500000"]  # TIME: 100.5 s after the session's creation
SEEN = b"1700000090000000"  # its last-seen score, µs: 10.5 s before NOW


def test_a_load_reads_with_plain_commands_and_runs_its_script_only_when_it_has_work() -> None:
    hash_ = [b"c", b"1700000000000", b"dn", b"1"]
    op = sessions.ops.load(CFG, TOKEN, 60.0)
    (request,) = next(op)
    assert [command[0] for command in request.commands] == ["HGETALL", "ZSCORE", "TIME"]
    # Seen 10.5 s ago, touched after 60: the hash, no script.
    assert drive(op, [[[hash_, SEEN, NOW]]], started=True).value == {"c": hash_[1], "dn": b"1"}
    due = [
        [hash_, SEEN, [b"1700000150", b"0"]],  # seen 60 s ago: a touch is due
        [hash_, None, NOW],  # missing from its index: listed again
        [[b"dn", b"1"], SEEN, NOW],  # a hash with no `c` is no session
    ]
    for first in due:
        driven = drive(sessions.ops.load(CFG, TOKEN, 60.0), [[first], [[[1]]]])
        assert isinstance(driven.steps[1][0].commands[0], ScriptCall)
    # The script's word stands: a session ended between the two reads as missing.
    assert drive(sessions.ops.load(CFG, TOKEN, 60.0), [[[hash_, None, NOW]], [[[0]]]]).value is None
    # Gone: nothing to do, unless its index entry is left to forget.
    assert drive(sessions.ops.load(CFG, TOKEN, 60.0), [[[[], None, NOW]]]).value is None
    assert drive(sessions.ops.load(CFG, TOKEN, 60.0), [[[[], SEEN, NOW]], [[[0]]]]).value is None


def test_a_load_runs_its_script_past_an_absolute_timeout() -> None:
    cfg = dataclasses.replace(CFG, sessions=SessionSettings(absolute_timeout=100))
    hash_ = [b"c", b"1700000000000"]
    driven = drive(sessions.ops.load(cfg, TOKEN, 60.0), [[[hash_, SEEN, NOW]], [[[0]]]])
    assert driven.value is None  # 100.5 s after its creation: the script deletes it
