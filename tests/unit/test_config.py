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


# -- item view ranking -------------------------------------------------------------------


def test_ranking_defaults_are_the_books() -> None:
    from webtier.config import RankingSettings

    settings = Config().ranking
    assert settings == RankingSettings()
    assert (settings.keep, settings.factor, settings.interval) == (20_000, 0.5, 300)


@pytest.mark.parametrize(
    "settings",
    [
        {"keep": 0},
        {"keep": 2.5},
        {"factor": 0},
        {"factor": 1.5},
        {"factor": float("nan")},
        {"factor": True},
        {"interval": 0},
        {"interval": 0.5},
        {"interval": 8 * 86400},
    ],
)
def test_bad_ranking_settings_fail_when_built(settings: dict[str, object]) -> None:
    from webtier.config import RankingSettings

    with pytest.raises(ConfigError):
        RankingSettings(**settings)  # type: ignore[arg-type]
