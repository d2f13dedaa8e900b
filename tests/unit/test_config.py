from __future__ import annotations

import pytest

from webtier.config import Config, CounterSettings, Precision, RetryPolicy
from webtier.errors import ConfigError


def test_book_defaults() -> None:
    settings = CounterSettings()
    assert [p.seconds for p in settings.precisions] == [1, 5, 60, 300, 3600, 18000, 86400]
    assert {p.samples for p in settings.precisions} == {120}
    assert settings.granule == 1
    assert settings.horizon == 120 * 86400


def test_granule_is_the_gcd_of_precisions() -> None:
    assert CounterSettings.of((10, 60, 300)).granule == 10


@pytest.mark.parametrize(
    "build",
    [
        lambda: Precision(0),
        lambda: Precision(1, 0),
        lambda: Precision(True),  # type: ignore[arg-type]
        lambda: CounterSettings(precisions=()),
        lambda: CounterSettings.of((5, 1)),
        lambda: CounterSettings.of((5, 5)),
        lambda: CounterSettings(shards=0),
        lambda: RetryPolicy(attempts=-1),
        lambda: RetryPolicy(backoff=2, backoff_cap=1),
        lambda: Config(prefix="a b"),
    ],
)
def test_bad_settings_fail_when_built(build: object) -> None:
    with pytest.raises(ConfigError):
        build()  # type: ignore[operator]


def test_config_builds_its_keyspace() -> None:
    assert Config(prefix="shop").keys.prefix == "shop"
