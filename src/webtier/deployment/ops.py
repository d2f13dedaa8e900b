"""The deployment's settings in Redis: stored by the first writer, checked by the rest.

One JSON string per prefix (``<prefix>:{meta}:settings``, a hash tag of its
own, so one slot on Cluster), ``{"version": 1, "settings": {...}}``, holding
the settings that decide where data lives (:mod:`webtier.deployment.layout`).
:func:`check` stores this process's settings with ``SET NX``, so of
concurrent first writers exactly one wins, then reads back what is stored
and refuses to go on if it differs. The key has no TTL: it must outlive
every key it describes, and it is one per prefix.

``version`` is the layout of the keys these settings describe: a webtier
that lays keys out differently bumps it, and refuses settings of another
version rather than misread them.
"""

from __future__ import annotations

import json

from webtier._core.protocol import Op, Reply, read, write
from webtier.config import Config
from webtier.deployment.layout import BEFORE_STORED, differences, following, layout
from webtier.errors import ConfigError, SettingsMismatch
from webtier.types import DeploymentSettings

VERSION = 1
TRIES = 3  # a reset between the store and the read sends both again


def check(cfg: Config) -> Op[DeploymentSettings]:
    """Store this config's settings as the deployment's if none are stored
    yet, else check that they agree with those stored; return the stored
    ones. Raises :class:`~webtier.errors.SettingsMismatch` naming each
    setting that differs. One round trip; call it once, at startup."""
    key, mine = cfg.keys.deployment_settings, layout(cfg)
    for _ in range(TRIES):
        _, reply = yield write(
            key, ("SET", key, _encode(mine), "NX"), ("GET", key), idempotent=True
        )
        found = _decode(key, reply)
        if found is not None:
            refuse_differences(mine, found)
            return found
    return DeploymentSettings(VERSION, mine)  # reset each time: as if ours was stored


def stored(cfg: Config) -> Op[DeploymentSettings | None]:
    """The deployment's stored settings, or None when none are stored yet."""
    key = cfg.keys.deployment_settings
    (reply,) = yield read(key, ("GET", key))
    return _decode(key, reply)


def adopt(cfg: Config) -> Op[DeploymentSettings]:
    """Store this config's settings as the deployment's, over whatever was
    stored: a deliberate change (data written under the old settings is not
    moved; see docs/deployment-settings.md)."""
    key, mine = cfg.keys.deployment_settings, layout(cfg)
    yield write(key, ("SET", key, _encode(mine)), idempotent=True)
    return DeploymentSettings(VERSION, mine)


def reset(cfg: Config) -> Op[bool]:
    """Remove the stored settings (True if there were some): the next
    writer's become the deployment's."""
    key = cfg.keys.deployment_settings
    (removed,) = yield write(key, ("DEL", key), idempotent=True)
    return bool(removed)


def refuse_differences(
    mine: dict[str, int | float | str],
    found: DeploymentSettings,
    names: set[str] | None = None,
    fix: str | None = None,
) -> None:
    """Raise SettingsMismatch if ``mine`` (only its ``names``, when given)
    differs from ``found``, or ``found`` is of another layout version."""
    differ: tuple[tuple[str, object, object], ...] = differences(mine, found.values, names)
    if found.version != VERSION:  # the key layouts differ: no setting can agree
        differ = (("the key layout version", VERSION, found.version),)
        fix = "run a webtier of the deployment's version"
    if differ:
        raise SettingsMismatch(differ) if fix is None else SettingsMismatch(differ, fix)


def _encode(values: dict[str, int | float | str]) -> str:
    return json.dumps({"version": VERSION, "settings": values}, sort_keys=True)


def _decode(key: str, reply: Reply) -> DeploymentSettings | None:
    if reply is None:
        return None
    try:
        data = json.loads(reply)
        version, values = data["version"], data["settings"]
        if not isinstance(version, int) or not isinstance(values, dict):
            raise TypeError("not {version: int, settings: {...}}")
        if version != VERSION:  # another layout: shown, refused by checks, never read
            plain = (int, float, str)
            return DeploymentSettings(
                version, {n: v for n, v in values.items() if isinstance(v, plain)}
            )
        # Settings stored before one was added were written in its old layout.
        values = {**BEFORE_STORED, **values}
        # Checked as settings are, and written as this version writes them.
        checked = layout(following(Config().for_client(cluster=False), values))
    except (ValueError, KeyError, TypeError) as error:  # ConfigError is a ValueError
        raise ConfigError(
            f"the deployment's settings at {key} cannot be read ({error}); "
            "`webtier settings reset` removes them"
        ) from None
    return DeploymentSettings(version, {name: checked[name] for name in values if name in checked})
