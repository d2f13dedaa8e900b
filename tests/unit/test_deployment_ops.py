"""The deployment's settings, fed replies by hand: what is stored, what is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webtier import deployment
from webtier._core.protocol import Request
from webtier.config import Config, CounterSettings, SessionSettings, StatsSettings
from webtier.deployment.layout import LAYOUT, differences, following, layout, parse
from webtier.errors import ConfigError, SettingsMismatch
from webtier.types import DeploymentSettings

KEY = "shop:{meta}:settings"


def finish(op: Any, reply: object) -> object:
    with pytest.raises(StopIteration) as done:
        op.send(reply)
    return done.value.value


def stored_reply(config: Config, version: int = deployment.ops.VERSION) -> bytes:
    return json.dumps({"version": version, "settings": layout(config)}).encode()


def test_every_setting_that_moves_a_key_is_stored_and_nothing_else() -> None:
    values = layout(Config(sessions=SessionSettings(shards=16)))
    assert set(values) == set(LAYOUT) == {
        "counters.precisions", "counters.shards", "pagecache.shards", "ranking.interval",
        "ranking.shards", "rows.shards", "sessions.shards", "stats.period",
        "stats.relative_error", "stats.shards",
    }  # fmt: skip
    assert values["sessions.shards"] == 16
    assert (
        values["counters.precisions"] == "1:120 5:120 60:120 300:120 3600:120 18000:120 86400:120"
    )
    assert values["stats.relative_error"] == 0.02


def test_check_stores_with_set_nx_and_reads_back_in_one_round_trip() -> None:
    config = Config(prefix="shop", sessions=SessionSettings(shards=16))
    op = deployment.ops.check(config)
    request = next(op)
    assert isinstance(request, Request)
    assert request.route == KEY
    assert request.idempotent
    (set_nx, get) = request.commands
    assert set_nx[:2] == ("SET", KEY)
    assert set_nx[3:] == ("NX",)
    assert json.loads(set_nx[2]) == {"version": 1, "settings": layout(config)}
    assert get == ("GET", KEY)
    found = finish(op, [True, set_nx[2].encode()])  # type: ignore[union-attr]
    assert found == DeploymentSettings(1, layout(config))


def test_check_refuses_other_settings_naming_both_values() -> None:
    op = deployment.ops.check(Config(prefix="shop", sessions=SessionSettings(shards=7)))
    next(op)
    theirs = Config(sessions=SessionSettings(shards=16), stats=StatsSettings(period=60))
    with pytest.raises(SettingsMismatch) as refused:
        op.send([None, stored_reply(theirs)])
    assert refused.value.differences == (("sessions.shards", 7, 16), ("stats.period", 3600, 60))
    message = str(refused.value)
    assert "\n" not in message
    assert "sessions.shards is 7 here, 16 in Redis, stats.period is 3600 here, 60 in Redis" in (
        message
    )
    assert isinstance(refused.value, ConfigError)


def test_check_sends_again_when_the_settings_were_reset_in_between() -> None:
    config = Config(prefix="shop")
    op = deployment.ops.check(config)
    next(op)
    again = op.send([True, None])  # removed between the SET and the GET
    assert isinstance(again, Request)
    assert finish(op, [True, stored_reply(config)]) == DeploymentSettings(1, layout(config))


def test_another_layout_version_is_refused_whatever_its_settings() -> None:
    config = Config(prefix="shop")
    op = deployment.ops.check(config)
    next(op)
    with pytest.raises(SettingsMismatch, match="layout version is 1 here, 2 in Redis"):
        op.send([None, stored_reply(config, version=2)])
    op = deployment.ops.stored(config)
    next(op)
    assert finish(op, [stored_reply(config, version=2)]).version == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "raw",
    [b"junk", b"[]", b'{"version": 1}', b'{"version": "1", "settings": {}}',
     b'{"version": 1, "settings": {"sessions.shards": 0}}',
     b'{"version": 1, "settings": {"sessions.shards": true}}',
     b'{"version": 1, "settings": {"counters.precisions": "1:x"}}',
     b'{"version": 1, "settings": {"counters.precisions": 5}}'],
)  # fmt: skip
def test_unreadable_settings_say_how_to_remove_them(raw: bytes) -> None:
    op = deployment.ops.stored(Config(prefix="shop"))
    next(op)
    with pytest.raises(ConfigError, match=r"shop:\{meta\}:settings cannot be read .*reset"):
        op.send([raw])


def test_stored_adopt_and_reset() -> None:
    config = Config(prefix="shop", counters=CounterSettings.of((1, 60), samples=10))
    op = deployment.ops.stored(config)
    assert next(op).commands == (("GET", KEY),)  # type: ignore[union-attr]
    assert finish(op, [None]) is None
    op = deployment.ops.adopt(config)
    ((command, key, value),) = next(op).commands  # type: ignore[union-attr,misc]
    assert (command, key) == ("SET", KEY)  # over whatever was stored
    assert json.loads(value)["settings"]["counters.precisions"] == "1:10 60:10"
    assert finish(op, [True]) == DeploymentSettings(1, layout(config))
    op = deployment.ops.reset(config)
    assert next(op).commands == (("DEL", KEY),)  # type: ignore[union-attr]
    assert finish(op, [1]) is True


def test_following_takes_the_given_values_and_checks_them() -> None:
    config = following(Config(prefix="shop"), {"sessions.shards": 16, "counters.precisions": "5:3"})
    assert config.prefix == "shop"
    assert config.sessions.shards == 16
    assert config.counters.seconds == (5,)
    assert config.counters.precisions[0].samples == 3
    assert following(config, {"unknown.name": 1}) == config
    with pytest.raises(ConfigError, match="shards"):
        following(config, {"sessions.shards": 0})


def test_parse_reads_the_command_lines_text() -> None:
    assert parse("sessions.shards", "16") == 16
    assert parse("stats.relative_error", "0.01") == 0.01
    assert parse("counters.precisions", "1, 60:10") == "1:120 60:10"
    for name, text in (("sessions.shards", "x"), ("counters.precisions", "1:"), ("nope", "1")):
        with pytest.raises(ConfigError):
            parse(name, text)


def test_differences_only_of_the_names_asked() -> None:
    here, there = {"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 5, "c": 4}
    assert differences(here, there) == (("b", 2, 5), ("c", 3, 4))
    assert differences(here, there, {"c"}) == (("c", 3, 4),)
