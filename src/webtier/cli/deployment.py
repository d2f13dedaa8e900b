"""The tier a command opens follows the deployment's settings.

The settings that decide where data lives are stored in Redis by the
deployment's first writer (docs/deployment-settings.md). A command reads
them when it opens its tier: a setting its command line leaves at
webtier's default takes the deployment's value, so ``webtier sessions
stats`` counts the sessions of a deployment of 16 shards without being
told; a setting the command line sets otherwise (``sessions --shards 7``)
must agree, or the command stops with one line naming both values. With
none stored, the command line's settings are used as they are: a command
never stores them (a worker, a writer, does).
"""

from __future__ import annotations

from webtier.config import Config
from webtier.deployment.layout import following, layout
from webtier.deployment.ops import refuse_differences
from webtier.sync import WebTier

FIX = (
    "leave the option out to follow the deployment, "
    "or change the deployment's settings with `webtier settings adopt`"
)


def following_deployment(tier: WebTier) -> WebTier:
    """``tier``, or a tier on its client with the deployment's settings in
    place of those the command line left at their defaults; raises
    SettingsMismatch if one it set differs from the deployment's."""
    found = tier.deployment.stored()
    if found is None:
        return tier
    cluster = not tier.transport.one_node
    here, defaults = layout(tier.config), layout(Config().for_client(cluster=cluster))
    given = {name for name, value in here.items() if value != defaults[name]}
    refuse_differences(here, found, given, FIX)
    config = following(tier.config, found.values)
    return tier if layout(config) == here else WebTier(tier.client, config)
