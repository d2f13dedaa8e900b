"""Row cache operations, fed replies by hand: what they send, and what they
make of what comes back."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from tests.helpers.ops import drive
from webtier import rows
from webtier._core.keys import shard_of
from webtier._core.protocol import Call, Gather, Request, ScriptCall
from webtier.config import Config, RowSettings
from webtier.errors import ConfigError, InvalidInput, ServerError, SourceError
from webtier.rows import FunctionSource
from webtier.rows.codec import decode
from webtier.rows.sql import SqlSource

# With 2 shards, rows "4" and "7" fall in shard 0, rows "1" and "9" in shard 1.
TABLE = {"1": {"id": 1, "name": "lamp"}, "4": {"id": 4, "name": "mug"}}
SOURCE = FunctionSource("inv", TABLE.get)
CFG = Config(prefix="p", rows=RowSettings(sources=(SOURCE,), shards=2, batch=3))


def shard(key: str) -> Any:
    return CFG.keys.row_shard("inv", shard_of(key, 2))


def test_keys_of_a_row_share_one_tag() -> None:
    s = shard("1")
    assert s.route == f"p:{{r:inv:{shard_of('1', 2)}}}"
    assert s.row("1") == f"{s.route}:row:1"
    assert {s.due, s.delay, s.fill, s.lease, s.fail, s.seq} == {
        f"{s.route}:{kind}" for kind in ("due", "delay", "fill", "lease", "fail", "seq")
    }


def test_schedule_is_one_idempotent_script_call() -> None:
    request = next(rows.ops.schedule(CFG, SOURCE, 1, 2.5))
    assert isinstance(request, Request)
    assert request.idempotent
    (call,) = request.commands
    assert isinstance(call, ScriptCall)
    assert call.script is rows.ops.SCHEDULE
    s = shard("1")
    assert call.keys == (s.due, s.delay, s.fill, s.lease, s.fail, s.row("1"))
    assert call.args == ("1", 2500)
    assert next(rows.ops.schedule(CFG, SOURCE, 1, -1)).commands[0].args == ("1", 0)  # type: ignore[union-attr]


@pytest.mark.parametrize("delay", [float("nan"), "1", None, True, 10**9, float("inf")])
def test_bad_delays_are_refused_before_anything_is_sent(delay: Any) -> None:
    with pytest.raises(InvalidInput, match="delay"):
        next(rows.ops.schedule(CFG, SOURCE, 1, delay))


def test_a_tiny_positive_delay_is_at_least_one_ms() -> None:
    assert next(rows.ops.schedule(CFG, SOURCE, 1, 1e-9)).commands[0].args == ("1", 1)  # type: ignore[union-attr]


def test_get_is_one_read_and_an_empty_copy_means_no_such_row() -> None:
    op = rows.ops.get(CFG, SOURCE, 2)
    request = next(op)
    assert isinstance(request, Request)
    assert request.commands == (("GET", shard("2").row("2")),)
    assert drive(rows.ops.get(CFG, SOURCE, 2), [[b'{"row":{"a":1}}']]).value == {"a": 1}
    assert drive(rows.ops.get(CFG, SOURCE, 2), [[b""]]).value is None
    assert drive(rows.ops.get(CFG, SOURCE, 2), [[None]]).value is None


def claim_reply(
    now: int, head: int, claimed: list[tuple[str, int, int]], dropped: list[str]
) -> Any:
    flat: list[Any] = [now, head, len(claimed)]
    for key, ticket, due in claimed:
        flat += [key.encode(), ticket, str(due).encode()]
    flat += [key.encode() for key in dropped]
    return [flat]


def test_a_round_claims_every_shard_loads_once_and_stores_with_the_tickets() -> None:
    op = rows.refresh.refresh_round(CFG)
    step = next(op)
    assert isinstance(step, Gather)
    assert [r.route for r in step.requests] == [shard("4").route, shard("1").route]
    assert not any(r.idempotent for r in step.requests)
    # batch, lease (ms), due by (now), the ttl of the loads' bookkeeping (ms)
    args = {r.commands[0].args for r in step.requests}  # type: ignore[union-attr]
    # One round: one nonce (random) ends every ticket its claims hand out.
    ((*settings, nonce),) = args
    assert settings == [3, 10_000, "", 86_400_000]
    assert re.fullmatch(r"-[0-9a-f]{8}", nonce)
    step = op.send(
        [
            claim_reply(1000, 5000, [("4", 8, 950)], []),
            claim_reply(1000, -1, [("1", 7, 900)], ["9"]),
        ]
    )
    assert isinstance(step, tuple)  # the dropped row's copy goes
    assert [r.commands for r in step] == [(("DEL", shard("9").row("9")),)]
    step = op.send([[1]])
    assert isinstance(step, Call)
    assert sorted(step.blocking()) == ["1", "4"]  # both rows, one load
    step = op.send(step.blocking())
    assert isinstance(step, tuple)
    entries = {}
    for request in step:
        (call,) = request.commands
        assert isinstance(call, ScriptCall)
        assert call.script is rows.ops.STORE
        assert call.args[:2] == (300_000, 5000)  # ttl and missing_ttl, ms
        key, ticket, mode, data = call.args[2:]
        assert call.keys[5:] == (shard(str(key)).row(str(key)),)
        entries[key] = (ticket, mode, decode(str(data)))
    assert entries == {"1": ("7", "r", TABLE["1"]), "4": ("8", "r", TABLE["4"])}
    with pytest.raises(StopIteration) as done:
        op.send([[[1]], [[1]]])
    report = done.value.value.report
    assert (report.claimed, report.stored, report.dropped) == (2, 2, 1)
    assert (done.value.value.now, done.value.value.next_due, done.value.value.more) == (
        1000,
        5000,
        False,
    )


def test_store_results_are_counted_as_fenced_stored_removed() -> None:
    op = rows.refresh.refresh_round(
        Config(prefix="p", rows=RowSettings(sources=(SOURCE,), shards=1))
    )
    next(op)
    step = op.send([claim_reply(1, -1, [("1", 1, 1), ("4", 2, 1), ("5", 3, 1)], [])])
    step = op.send(step.blocking())  # type: ignore[union-attr]
    (store,) = step  # type: ignore[misc]
    assert store.commands[0].args[-1] == ""  # row "5" is not in the table
    with pytest.raises(StopIteration) as done:
        op.send([[[0, 1, 2]]])
    report = done.value.value.report
    assert (report.fenced, report.stored, report.removed) == (1, 1, 1)


def test_a_failed_load_gives_the_rows_back_and_raises_source_error() -> None:
    broken = FunctionSource("inv", lambda key: 1 / 0)  # type: ignore[arg-type,return-value]
    cfg = Config(prefix="p", rows=RowSettings(sources=(broken,), shards=1, batch=3))
    op = rows.refresh.refresh_round(cfg)
    next(op)
    step = op.send([claim_reply(1000, -1, [("1", 7, 900)], [])])
    assert isinstance(step, Call)
    step = op.throw(ZeroDivisionError("boom"))
    assert isinstance(step, tuple)
    (release,) = step
    assert release.idempotent
    assert release.commands[0].script is rows.ops.RELEASE  # type: ignore[union-attr]
    # Due again at once: the worker backs off as a whole while the source fails.
    assert release.commands[0].args == (0, 0, 86_400_000, "1", "7")  # type: ignore[union-attr]
    with pytest.raises(SourceError, match="boom") as failed:
        op.send([[1]])
    assert isinstance(failed.value.__cause__, ZeroDivisionError)


def test_the_bookkeeping_of_loads_outlives_every_lease_and_backoff() -> None:
    day = 86_400_000
    assert rows.ops.bookkeeping_ms(RowSettings()) == day
    assert rows.ops.bookkeeping_ms(RowSettings(lease=3 * 86400)) == 6 * day
    assert rows.ops.bookkeeping_ms(RowSettings(fill_lease=86400)) == 2 * day
    assert rows.ops.bookkeeping_ms(RowSettings(retry_cap=2 * 86400)) == 4 * day


def test_a_read_through_takes_its_ticket_with_the_bookkeeping_ttl() -> None:
    request = next(rows.ops.get(CFG, SOURCE, 2, load=True))
    assert request.commands == (("GET", shard("2").row("2")),)  # type: ignore[union-attr]
    op = rows.ops.get(CFG, SOURCE, 2, load=True)
    next(op)
    fill = op.send([None])
    assert isinstance(fill, Request)
    (call,) = fill.commands
    assert isinstance(call, ScriptCall)
    assert call.script is rows.ops.FILL
    s = shard("2")
    assert call.keys == (s.fill, s.lease, s.seq, s.row("2"))
    assert call.args[:4] == ("2", 5000, "miss", 86_400_000)
    assert re.fullmatch(r"-[0-9a-f]{8}", str(call.args[4]))  # a nonce of its own


def test_a_full_shard_asks_for_another_round_at_once() -> None:
    cfg = Config(prefix="p", rows=RowSettings(sources=(SOURCE,), shards=1, batch=1))
    op = rows.refresh.refresh_round(cfg)
    next(op)
    step = op.send([claim_reply(1000, 1000, [("1", 7, 900)], [])])
    step = op.send(step.blocking())  # type: ignore[union-attr]
    with pytest.raises(StopIteration) as done:
        op.send([[[1]]])
    assert done.value.value.more


def test_a_shard_that_fails_does_not_stop_the_others() -> None:
    cfg = Config(prefix="p", rows=RowSettings(sources=(SOURCE,), shards=2, batch=3))
    op = rows.refresh.refresh_round(cfg)
    step = next(op)
    assert isinstance(step, Gather)
    failure = ServerError("node down")
    step = op.send([claim_reply(1000, -1, [("4", 7, 900)], []), failure])
    step = op.send(step.blocking())  # type: ignore[union-attr]
    with pytest.raises(ServerError):
        op.send([[[1]]])  # stored its row, then reports the failure


def test_no_sources_means_no_requests() -> None:
    with pytest.raises(StopIteration) as done:
        next(rows.refresh.refresh_round(Config()))
    assert done.value.value.report.claimed == 0


@pytest.mark.parametrize(
    "settings",
    [
        {"shards": 0},
        {"batch": 0},
        {"lease": 0},
        {"poll": True},
        {"ttl": float("nan")},
        {"missing_ttl": -1},
        {"retry_backoff": 10, "retry_cap": 1},
        {"sources": (FunctionSource("a", TABLE.get), FunctionSource("a", TABLE.get))},
    ],
)
def test_settings_are_checked(settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        RowSettings(**settings)


@pytest.mark.parametrize("name", ["", "a:b", "{a}", "a b", "x" * 65, 5])
def test_source_names_go_in_a_hash_tag_so_are_plain(name: Any) -> None:
    with pytest.raises(ConfigError):
        FunctionSource(name, TABLE.get)


def test_declared_tables_know_their_key_type_without_io() -> None:
    table = sa.Table("t", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True))
    source = SqlSource("t", table, key="id", database="sqlite://")
    assert source.key(42) == source.key("42") == source.key("042") == "42"
    with pytest.raises(InvalidInput):
        source.key("forty-two")
    by_uuid = sa.Table("u", sa.MetaData(), sa.Column("id", sa.Uuid, primary_key=True))
    ident = uuid.uuid4()
    uuids = SqlSource("u", by_uuid, key="id", database="sqlite://")
    assert uuids.key(str(ident).upper()) == uuids.key(ident) == str(ident)
    with pytest.raises(ConfigError, match="no column"):
        SqlSource("t", table, key="nope", database="sqlite://")
    with pytest.raises(ConfigError):
        SqlSource("t", table, key="id", database=42)  # type: ignore[arg-type]
