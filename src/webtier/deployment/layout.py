"""The settings that decide where a deployment's data lives.

A session's shard follows from its token and ``sessions.shards``, a
statistic's key from ``stats.period``... A process whose value differs from
the one the data was written with looks in the wrong place and finds
nothing: ``webtier sessions --shards 7 stats`` reports 0 sessions while 6
exist. These settings are stored in Redis by the deployment's first writer
(:mod:`webtier.deployment.ops`) and checked by the rest.

Only settings that change a key, or how stored data is read, are here;
timeouts, limits and batch sizes may differ from one process to the next.
The page cache's request rules (ignored parameters, proxy headers) change
which key a request maps to too, but a difference costs misses, never
wrong answers, and they belong to the app's routes: they are not stored.

A setting is named ``<group>.<field>`` after :class:`~webtier.config.Config`'s
fields; ``counters.precisions`` is written ``seconds:samples`` per
precision, space-separated (``1:120 5:120 60:120``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any, TypeAlias

from webtier.config import Config, Precision
from webtier.errors import ConfigError

Setting: TypeAlias = int | float | str

# Each stored setting, by name, with what it decides.
LAYOUT: dict[str, str] = {
    "counters.precisions": "the counters' sample keys and how many samples each keeps",
    "counters.shards": "the shard of each counter's keys and of its index entry",
    "pagecache.shards": "the shard of each page and of an item's pages",
    "ranking.interval": "the rescale periods, which the rescale fence counts",
    "ranking.shards": "the shard of each item's views, and the shards' keys",
    "rows.shards": "the shard of each row's schedule entry and copy",
    "sessions.shards": "the shard of each session and of each user's index",
    "stats.period": "the period in each statistics key",
    "stats.relative_error": "the histogram buckets a stored value falls in",
    "stats.shards": "the shard of each context's statistics",
}


# The value of a setting added after deployments began storing theirs, for
# stored settings that lack it: the layout those deployments were written in.
BEFORE_STORED: dict[str, Setting] = {"ranking.shards": 1}


def layout(config: Config) -> dict[str, Setting]:
    """The layout settings of ``config``, by name (see :data:`LAYOUT`)."""
    return {name: _value(config, name) for name in LAYOUT}


def _value(config: Config, name: str) -> Setting:
    group, field = name.split(".")
    value = getattr(getattr(config, group), field)
    if name == "counters.precisions":
        return " ".join(f"{p.seconds}:{p.samples}" for p in value)
    if name == "stats.relative_error":
        return float(value)
    if value is None:
        # ranking.shards left to the client: a tier's config has it decided
        # (Config.for_client); a bare config counts as one, as operations do.
        return 1
    return int(value)


def parse(name: str, text: str) -> Setting:
    """A setting's value from text (the CLI's ``--set name=value``)."""
    if name not in LAYOUT:
        raise ConfigError(f"unknown setting {name!r}; the settings are {', '.join(LAYOUT)}")
    try:
        if name == "counters.precisions":
            return " ".join(f"{p.seconds}:{p.samples}" for p in _precisions(text))
        if name == "stats.relative_error":
            return float(text)
        return int(text)
    except ValueError as error:  # ConfigError is one
        raise ConfigError(f"{name}: {text!r} refused ({error})") from None


def _precisions(text: str) -> tuple[Precision, ...]:
    """``seconds:samples`` (or ``seconds``, with the default samples) per
    precision, separated by spaces or commas."""
    found = []
    for part in text.replace(",", " ").split():
        seconds, colon, samples = part.partition(":")
        found.append(Precision(int(seconds), int(samples)) if colon else Precision(int(seconds)))
    return tuple(found)


def following(config: Config, values: Mapping[str, Setting]) -> Config:
    """``config`` with the layout settings of ``values`` (the stored ones,
    say) instead of its own; names it does not know are ignored. A value
    the settings refuse raises ConfigError naming it."""
    changes: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        if name in LAYOUT:
            group, field = name.split(".")
            changes.setdefault(group, {})[field] = value
    groups = {}
    for group, fields in changes.items():
        try:
            if isinstance(fields.get("precisions"), str):
                fields["precisions"] = _precisions(fields["precisions"])
            groups[group] = dataclasses.replace(getattr(config, group), **fields)
        except (ValueError, TypeError) as error:  # ConfigError is a ValueError
            raise ConfigError(f"{group}: {error}") from None
    return dataclasses.replace(config, **groups)


def differences(
    here: Mapping[str, Setting], there: Mapping[str, Setting], names: Collection[str] | None = None
) -> tuple[tuple[str, Setting, Setting], ...]:
    """(name, value here, value there) of each setting both name and
    disagree on, in name order; only those in ``names`` when given."""
    return tuple(
        (name, here[name], there[name])
        for name in sorted(here)
        if name in there and here[name] != there[name] and (names is None or name in names)
    )
