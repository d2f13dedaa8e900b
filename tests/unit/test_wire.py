"""The wire coordinator, fed outcomes by hand: every failure policy without a server."""

from __future__ import annotations

from typing import Any

import pytest
from redis import exceptions as rx

from tests.helpers.ops import drive
from webtier._core.actions import Address, Batch, Locate, Outcome, Refresh, Send, Sleep
from webtier._core.protocol import Gather, Request, ScriptCall, read, write
from webtier._core.scripts import Script
from webtier._core.wire import NOT_DONE, exchange, flat, planned, settled
from webtier.config import RetryPolicy
from webtier.errors import OutcomeUnknown, RedisUnavailable, ServerError

SCRIPT = Script("demo", b"return 1", "0" * 40)
POLICY = RetryPolicy(attempts=2, backoff=0.01, backoff_cap=0.02)


def test_hot_path_is_one_send() -> None:
    request = read("k", ("GET", "k"), ("GET", "j"))
    result, seen = drive(exchange(request, POLICY), [Outcome([b"1", None])])
    assert result == [b"1", None]
    assert seen == [Send("k", (("GET", "k"), ("GET", "j")))]


def test_noscript_loads_the_script_and_sends_again_even_for_a_write() -> None:
    call = ScriptCall(SCRIPT, ("k",), (1,))
    request = write("k", call, idempotent=False)
    result, seen = drive(
        exchange(request, POLICY),
        [Outcome([rx.NoScriptError("No matching script")]), Outcome([b"sha", 7])],
    )
    assert result == [7]
    assert seen[1] == Send("k", (("SCRIPT", "LOAD", b"return 1"), call.command()))


def test_moved_refreshes_the_slot_map_and_sends_again() -> None:
    request = write("k", ("INCR", "k"), idempotent=False)
    moved = rx.MovedError("3999 127.0.0.1:7001")
    result, seen = drive(exchange(request, POLICY), [Outcome([moved]), None, Outcome([5])])
    assert result == [5]
    assert isinstance(seen[1], Refresh)
    assert seen[2] == Send("k", (("INCR", "k"),))


def test_ask_goes_to_the_named_node_after_asking() -> None:
    request = write("k", ("INCR", "k"), idempotent=False)
    result, seen = drive(
        exchange(request, POLICY),
        [Outcome([rx.AskError("3999 10.0.0.9:7002")]), Outcome([b"OK", 1])],
    )
    assert result == [1]
    assert seen[1] == Send(Address("10.0.0.9", 7002), (("ASKING",), ("INCR", "k")))


@pytest.mark.parametrize(
    "error",
    [
        rx.TryAgainError("x"),
        rx.ClusterDownError("x"),
        rx.BusyLoadingError("x"),
        rx.MasterDownError("x"),
        rx.ResponseError("NOREPLICAS Not enough good replicas to write."),
    ],
)
def test_transient_refusals_back_off_then_send_again(error: Exception) -> None:
    request = write("k", ("INCR", "k"), idempotent=False)
    answers: list[Any] = [Outcome([error])]
    refreshes = isinstance(error, rx.ClusterDownError) or "NOREPLICAS" in str(error)
    answers += [None, None] if refreshes else [None]
    answers.append(Outcome([3]))
    result, seen = drive(exchange(request, POLICY), answers)
    assert result == [3]
    assert any(isinstance(a, Sleep) and 0 < a.seconds <= POLICY.backoff_cap for a in seen)


def test_failure_before_sending_retries_even_a_write() -> None:
    request = write("k", ("INCR", "k"), idempotent=False)
    refused = rx.ConnectionError("Error 111 connecting")
    result, _ = drive(
        exchange(request, POLICY), [Outcome([], refused, delivered=False), None, None, Outcome([1])]
    )
    assert result == [1]


def test_lost_reply_to_a_write_is_never_sent_again() -> None:
    request = write("k", ("INCR", "k"), idempotent=False)
    with pytest.raises(OutcomeUnknown) as caught:
        drive(
            exchange(request, POLICY),
            [Outcome([], rx.TimeoutError("Timeout reading"), delivered=True)],
        )
    assert isinstance(caught.value.__cause__, rx.TimeoutError)


def test_lost_reply_to_a_read_is_retried() -> None:
    request = read("k", ("GET", "k"))
    result, _ = drive(
        exchange(request, POLICY),
        [Outcome([], rx.TimeoutError("t"), delivered=True), None, None, Outcome([b"v"])],
    )
    assert result == [b"v"]


def test_replies_read_before_the_break_are_kept() -> None:
    # The first command was answered, the second was not: only the second is
    # retried (it is idempotent) and the first is not sent twice.
    request = read("k", ("GET", "a"), ("GET", "b"))
    result, seen = drive(
        exchange(request, POLICY),
        [Outcome([b"A"], rx.ConnectionError("reset"), delivered=True), None, None, Outcome([b"B"])],
    )
    assert result == [b"A", b"B"]
    assert seen[-1] == Send("k", (("GET", "b"),))


def test_retry_budget_ends_in_redis_unavailable() -> None:
    request = read("k", ("GET", "k"))
    down = Outcome([], rx.ConnectionError("refused"), delivered=False)
    answers = [down, None, None, down, None, None, down]
    with pytest.raises(RedisUnavailable) as caught:
        drive(exchange(request, POLICY), answers)
    assert not isinstance(caught.value, OutcomeUnknown)
    assert "3 tries" in str(caught.value)


def test_bad_credentials_are_not_retried() -> None:
    request = read("k", ("GET", "k"))
    with pytest.raises(RedisUnavailable, match="credentials"):
        drive(
            exchange(request, POLICY),
            [Outcome([], rx.AuthenticationError("WRONGPASS"), delivered=False)],
        )


def test_an_unexpected_error_reply_raises_server_error() -> None:
    request = read("k", ("GET", "k"))
    with pytest.raises(ServerError, match="WRONGTYPE"):
        drive(
            exchange(request, POLICY),
            [Outcome([rx.ResponseError("WRONGTYPE Operation against a key")])],
        )


def test_fan_out_groups_by_node_and_sends_in_one_batch() -> None:
    step = (read("a", ("GET", "a")), read("b", ("GET", "b")), read("c", ("GET", "c")))
    located = [("n1", "node1"), ("n2", "node2"), ("n1", "node1")]
    result, seen = drive(
        exchange(step, POLICY), [located, [Outcome([b"A", b"C"]), Outcome([b"B"])]]
    )
    assert result == [[b"A"], [b"B"], [b"C"]]
    assert seen[0] == Locate(("a", "b", "c"))
    assert seen[1] == Batch(
        (Send("node1", (("GET", "a"), ("GET", "c"))), Send("node2", (("GET", "b"),)))
    )


def test_requests_on_one_node_go_in_one_send_and_replies_split_back() -> None:
    step = (read("a", ("GET", "a"), ("GET", "x")), write("b", ("INCR", "b"), idempotent=False))
    located = [("n1", "node1"), ("n1", "node1")]
    result, seen = drive(exchange(step, POLICY), [located, Outcome([b"A", b"X", 3])])
    assert result == [[b"A", b"X"], [3]]
    assert seen == [
        Locate(("a", "b")),
        Send("node1", (("GET", "a"), ("GET", "x"), ("INCR", "b"))),
    ]
    # A single server has no node handles: the send goes by the first route.
    result, seen = drive(exchange(step, POLICY), [[("server", None)] * 2, Outcome([b"A", b"X", 3])])
    assert seen[1] == Send("a", (("GET", "a"), ("GET", "x"), ("INCR", "b")))


def test_no_requests_send_nothing() -> None:
    result, seen = drive(exchange((), POLICY), [])
    assert (result, seen) == ([], [])


def test_a_redirect_in_a_shared_send_resends_only_that_request() -> None:
    step = (read("a", ("GET", "a")), write("b", ("INCR", "b"), idempotent=False))
    moved = rx.MovedError("3999 127.0.0.1:7001")
    answers: list[Any] = [
        [("n1", "node1")] * 2,
        Outcome([b"A", moved]),
        None,  # the slot map is reloaded
        [("n2", "node2")],
        Outcome([4]),
    ]
    result, seen = drive(exchange(step, POLICY), answers)
    assert result == [[b"A"], [4]]
    assert isinstance(seen[2], Refresh)
    assert seen[4] == Send("node2", (("INCR", "b"),))


def test_gather_reports_failures_per_request() -> None:
    ok = write("a", ("INCR", "a"), idempotent=False)
    lost = write("b", ("INCR", "b"), idempotent=False)
    located = [("n1", "node1"), ("n2", "node2")]
    broken = Outcome([], rx.TimeoutError("t"), delivered=True)
    result, _ = drive(exchange(Gather((ok, lost)), POLICY), [located, [Outcome([1]), broken]])
    assert result[0] == [1]
    assert isinstance(result[1], OutcomeUnknown)


def test_gather_marks_unreachable_requests_as_not_applied() -> None:
    a = write("a", ("INCR", "a"), idempotent=False)
    down = Outcome([], rx.ConnectionError("refused"), delivered=False)
    answers: list[Any] = [down]  # a single request needs no Locate
    for _ in range(POLICY.attempts):
        answers += [None, None, down]
    result, _ = drive(exchange(Gather((a,)), POLICY), answers)
    assert type(result[0]) is RedisUnavailable


def test_unlocated_slot_is_sent_by_route_and_retried() -> None:
    step = (read("a", ("GET", "a")), read("b", ("GET", "b")))
    nowhere = rx.SlotNotCoveredError("no node")
    answers = [
        [("n1", "node1"), nowhere],
        [Outcome([b"A"]), Outcome([], nowhere, delivered=False)],
        None,
        None,
    ]
    answers += [[("n2", "node2")], Outcome([b"B"])]
    result, _ = drive(exchange(step, POLICY), answers)
    assert result == [[b"A"], [b"B"]]


def test_request_is_a_frozen_value() -> None:
    request = Request("k", (("GET", "k"),), True)
    with pytest.raises(AttributeError):
        request.route = "j"  # type: ignore[misc]


def test_a_fan_out_of_one_takes_the_hot_path() -> None:
    result, seen = drive(exchange((read("k", ("GET", "k")),), POLICY), [Outcome([b"v"])])
    assert result == [[b"v"]]
    assert seen == [Send("k", (("GET", "k"),))]  # no Locate


def test_a_fan_out_of_one_recovers_like_a_request() -> None:
    step = (write("k", ("INCR", "k"), idempotent=False),)
    result, _ = drive(
        exchange(step, POLICY), [Outcome([rx.MovedError("1 h:1")]), None, Outcome([1])]
    )
    assert result == [[1]]


def test_a_script_constant_is_read_from_its_source() -> None:
    script = Script("demo", b"-- SLACK is said here\nlocal SLACK = 3\nlocal OTHER = x\n", "0" * 40)
    assert script.constant("SLACK") == 3
    with pytest.raises(LookupError, match="OTHER"):
        script.constant("OTHER")
    with pytest.raises(LookupError):
        script.constant("LACK")


# -- the hot path an executor takes itself on a single server --------------------------


def test_the_hot_path_helpers_send_what_the_exchange_sends() -> None:
    call = ScriptCall(SCRIPT, ("k",), (1, "a"))
    steps: list[Any] = [
        read("k", ("GET", "k")),
        write("k", call, ("EXPIRE", "k", 5), idempotent=False),
        (write("k", call, idempotent=False), read("j", ("GET", "j"), ("TTL", "j"))),
        (read("k", ("GET", "k")),),
    ]
    for step in steps:
        commands = planned(step)
        sent = flat(commands)
        replies = [f"r{n}".encode() for n in range(len(sent))]
        located = [("server", None)] * (len(step) if isinstance(step, tuple) else 1)
        answers = [located] if isinstance(step, tuple) and len(step) > 1 else []
        answers.append(Outcome(list(replies)))
        result, seen = drive(exchange(step, POLICY), answers)
        assert seen[-1] == Send(seen[-1].target, sent)
        assert settled(step, Outcome(list(replies)), commands) == result


def test_the_hot_path_is_not_settled_by_an_error_or_a_broken_send() -> None:
    step = (read("k", ("GET", "k")), read("j", ("GET", "j")))
    commands = planned(step)
    assert settled(step, Outcome([b"v", rx.ResponseError("WRONGTYPE")]), commands) is NOT_DONE
    assert settled(step, Outcome([b"v"], rx.TimeoutError("slow")), commands) is NOT_DONE
    assert settled(step, Outcome([b"v", None]), commands) == [[b"v"], [None]]


def test_an_exchange_recovers_from_the_executors_own_first_send() -> None:
    call = ScriptCall(SCRIPT, ("k",), (1,))
    step = (write("k", call, idempotent=False), read("k", ("GET", "k")))
    first = Outcome([rx.NoScriptError("No matching script"), b"before"])
    wire = exchange(step, POLICY, first)
    assert next(wire) == Locate(("k", "k"))  # where what is left goes now
    action = wire.send([("server", None)] * 2)  # not the first send again: the script is loaded
    # The read went before the script ran: it goes again after it.
    assert action == Send("k", (("SCRIPT", "LOAD", b"return 1"), call.command(), ("GET", "k")))
    with pytest.raises(StopIteration) as done:
        wire.send(Outcome([b"sha", 7, b"after"]))
    assert done.value.value == [[7], [b"after"]]


def test_after_a_script_loaded_again_only_what_may_run_twice_goes_again() -> None:
    call = ScriptCall(SCRIPT, ("k",), (1,))
    step = (
        read("k", ("GET", "k")),  # before the script: its reply stands
        write("k", call, idempotent=False),
        write("k", ("INCR", "n"), idempotent=False),  # ran once: never again
        write("k", ("SET", "s", "1"), idempotent=True),
        read("k", ("HGETALL", "h")),
    )
    noscript = rx.NoScriptError("No matching script")
    first = Outcome([b"g", noscript, 1, b"OK", [b"f", b"old"]])
    wire = exchange(step, POLICY, first)
    next(wire)
    action = wire.send([("server", None)] * 3)
    assert action == Send(
        "k",
        (("SCRIPT", "LOAD", b"return 1"), call.command(), ("SET", "s", "1"), ("HGETALL", "h")),
    )
    with pytest.raises(StopIteration) as done:
        wire.send(Outcome([b"sha", 7, b"OK", [b"f", b"new"]]))
    assert done.value.value == [[b"g"], [7], [1], [b"OK"], [[b"f", b"new"]]]


def test_a_lost_write_in_the_executors_own_send_is_never_sent_again() -> None:
    step = write("k", ("INCR", "k"), idempotent=False)
    lost = Outcome([], rx.ConnectionError("reset"), delivered=True)
    with pytest.raises(OutcomeUnknown):
        next(exchange(step, POLICY, lost))
