"""The I/O-free parts of webtier's asyncio client: a Cluster's slot map read
from a CLUSTER SLOTS reply, the settings a URL and options give, and the
greeting a new connection sends."""

from __future__ import annotations

import dataclasses
import ssl
from typing import Any

import pytest

from webtier._core.mux.dial import NotMaster, check_master
from webtier._core.mux.settings import settings_from
from webtier._core.mux.slots import SLOTS, SlotMap, slot_of
from webtier._core.sentinel import role_in
from webtier.errors import ConfigError

REPLY = [
    [0, 5460, [b"10.0.0.1", 7000, b"id1"], [b"10.0.0.4", 7000, b"id4"]],
    [5461, 10922, [b"", 7001, b"id2"], [b"10.0.0.5", 7001, b"id5"]],
    [10923, 16383, [b"10.0.0.3", 7002, b"id3"]],
]


def test_the_slot_map_names_masters_only_as_owners() -> None:
    slots = SlotMap.parse(REPLY, ("10.0.0.9", 7001))
    assert slots.owners[0] == slots.owners[5460] == "10.0.0.1:7000"
    assert slots.owners[5461] == "10.0.0.9:7001"  # an empty host: the address asked
    assert slots.owners[SLOTS - 1] == "10.0.0.3:7002"
    assert slots.masters == {"10.0.0.1:7000", "10.0.0.9:7001", "10.0.0.3:7002"}
    # Replicas are known, to be asked for the map, after the masters.
    assert slots.nodes[:3] == [("10.0.0.1", 7000), ("10.0.0.9", 7001), ("10.0.0.3", 7002)]
    assert set(slots.nodes[3:]) == {("10.0.0.4", 7000), ("10.0.0.5", 7001)}
    assert not {f"{h}:{p}" for h, p in slots.nodes[3:]} & set(slots.owners)


def test_a_route_goes_to_the_master_of_its_hash_tag() -> None:
    slots = SlotMap.parse(REPLY, ("10.0.0.1", 7000))
    assert slot_of("shop:{c:3}:x") == slot_of("{c:3}")
    assert slots.owner("shop:{c:3}:x") == slots.owners[slot_of("c:3")]


def test_a_map_with_a_gap_has_no_owner_there() -> None:
    slots = SlotMap.parse(REPLY[:2], ("10.0.0.1", 7000))
    assert slots.owners[16000] is None


def test_a_url_and_options_as_settings() -> None:
    settings = settings_from(
        "redis://ann:secret@db.example:6380/3?protocol=3&socket_timeout=2.5",
        {"client_name": "shop", "connections": 2},
    )
    assert (settings.host, settings.port, settings.db) == ("db.example", 6380, 3)
    assert (settings.username, settings.password, settings.protocol) == ("ann", "secret", 3)
    assert settings.read_timeout == 2.5
    assert settings.connections == 2
    assert settings.greeting() == (
        ("HELLO", 3, "AUTH", "ann", "secret", "SETNAME", "shop"),
        ("SELECT", 3),
    )


def test_a_plain_connection_is_greeted_with_a_ping_and_a_password_with_auth() -> None:
    assert settings_from("redis://localhost/0", {}).greeting() == (("PING",),)
    assert settings_from("redis://:pw@localhost/0", {}).greeting() == (("AUTH", "pw"),)
    unix = settings_from("unix:///tmp/redis.sock?db=2", {})
    assert (unix.path, unix.name, unix.greeting()) == (
        "/tmp/redis.sock",
        "/tmp/redis.sock",
        (("SELECT", 2),),
    )


def test_a_sentinels_master_is_greeted_with_a_hello_that_says_its_role() -> None:
    # HELLO, not ROLE (which needs @admin): last on RESP2, the greeting's
    # own on RESP3, so the check costs no round trip.
    plain = dataclasses.replace(settings_from("redis://:pw@localhost/2", {}), master_only=True)
    assert plain.greeting() == (("AUTH", "pw"), ("SELECT", 2), ("HELLO", 2))
    resp3 = settings_from("redis://localhost/0?protocol=3", {})
    assert dataclasses.replace(resp3, master_only=True).greeting() == (("HELLO", 3),)


@pytest.mark.parametrize(
    ("hello", "role"),
    [
        ([b"server", b"redis", b"role", b"master", b"modules", []], "master"),
        ({b"role": b"replica", b"proto": 3}, "replica"),
        (["role", "sentinel"], "sentinel"),  # a client that decodes
        ([b"server", b"redis"], "unknown"),
    ],
)
def test_the_role_in_a_hello_reply(hello: Any, role: str) -> None:
    assert role_in(hello) == role
    if role == "master":
        check_master(hello, "10.0.0.1:6379")
    else:
        with pytest.raises(NotMaster, match=rf"is not a master \(its role: {role}\)"):
            check_master(hello, "10.0.0.1:6379")


def test_tls_settings_make_a_context() -> None:
    settings = settings_from("rediss://localhost:6380/0?ssl_cert_reqs=none", {})
    assert isinstance(settings.tls, ssl.SSLContext)
    assert settings.tls.verify_mode == ssl.CERT_NONE
    assert not settings.check_hostname


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"decode_responses": True}, "bytes"),
        ({"single_connection_client": True}, "single_connection_client"),
        ({"protocol": 4}, "protocol"),
        ({"connections": 0}, "connections"),
        ({"socket_timeout": -1}, "socket_timeout"),
        ({"max_in_flight": True}, "max_in_flight"),
    ],
)
def test_options_it_cannot_honour_are_refused(options: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        settings_from("redis://localhost/0", options)


def test_redis_py_pool_and_retry_options_are_accepted_and_ignored() -> None:
    settings = settings_from(
        "redis://localhost/0", {"max_connections": 10, "health_check_interval": 30}
    )
    assert settings.connections == 1
