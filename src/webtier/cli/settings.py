"""``webtier settings``: the deployment's settings stored in Redis, shown,
changed deliberately, or removed (docs/deployment-settings.md).

These commands open their tier without following the stored settings
(:mod:`webtier.cli.deployment`): they are how a deployment whose stored
settings are wrong, unreadable or of another webtier gets out of it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import click

from webtier.cli.output import json_option, print_json
from webtier.cli.shared import SharedOptions, confirm, confirm_deletion, deletes, pass_options
from webtier.config import Config
from webtier.connect import open as open_tier
from webtier.deployment.layout import LAYOUT, differences, following, layout, parse
from webtier.deployment.ops import VERSION
from webtier.errors import ConfigError, WebtierError
from webtier.sync import WebTier
from webtier.types import DeploymentSettings


@contextlib.contextmanager
def _tier(options: SharedOptions) -> Iterator[WebTier]:
    """A tier of the options' prefix, with webtier's default settings."""
    try:
        with open_tier(
            options.url, config=Config(prefix=options.prefix), data_dir=options.data_dir
        ) as tier:
            yield tier
    except WebtierError as error:
        raise click.ClickException(str(error)) from error


@click.group()
def settings() -> None:
    """The deployment's settings that decide where its data lives."""


@settings.command("show")
@json_option
@pass_options
def settings_show(options: SharedOptions, as_json: bool) -> None:
    """The settings stored by the deployment's first writer."""
    with _tier(options) as tier:
        found = tier.deployment.stored()
    if as_json:
        document = {
            "prefix": options.prefix,
            "stored": found is not None,
            "version": None if found is None else found.version,
            "settings": None if found is None else found.values,
        }
        print_json(document)
        return
    if found is None:
        click.echo(
            f"no settings stored under prefix {options.prefix!r}: "
            "the deployment's first writer (the app, a worker) stores its own"
        )
        return
    click.echo(f"settings of prefix {options.prefix!r} (key layout version {found.version}):")
    width = max(len(name) for name in LAYOUT)
    for name, value in sorted(found.values.items()):
        click.echo(f"  {name:<{width}}  {value}")


def _assignments(texts: tuple[str, ...]) -> dict[str, int | float | str]:
    values = {}
    for text in texts:
        name, equals, value = text.partition("=")
        if not equals:
            raise click.BadParameter(f"{text!r} is not NAME=VALUE", param_hint="--set")
        try:
            values[name.strip()] = parse(name.strip(), value.strip())
        except ConfigError as error:
            raise click.BadParameter(str(error), param_hint="--set") from error
    return values


@settings.command("adopt")
@click.option(
    "--set", "assignments", multiple=True, metavar="NAME=VALUE",
    help="A setting to change, named as `settings show` names it (repeatable).",
)  # fmt: skip
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_options
def settings_adopt(options: SharedOptions, assignments: tuple[str, ...], yes: bool) -> None:
    """Store new settings as the deployment's: the stored ones (webtier's
    defaults if none are stored) with the --set values in their place."""
    changes = _assignments(assignments)
    with _tier(options) as tier:
        found = _readable(tier)
        try:
            base = tier.config if found is None else following(tier.config, found.values)
            wanted = following(base, changes)
        except ConfigError as error:
            raise click.BadParameter(str(error), param_hint="--set") from error
        new = layout(wanted)
        differ = differences(new, found.values) if found is not None else ()
        if found is not None and not differ:
            click.echo("the deployment's settings are these already; nothing changed")
            return
        for name, value, old in differ or ((n, v, "(none)") for n, v in new.items()):
            click.echo(f"  {name}: {old} -> {value}")
        confirm(
            "Data written under the old settings stays where it is, where processes "
            "of the new ones do not look. Store these as the deployment's settings?",
            yes,
        )
        WebTier(tier.client, wanted).deployment.adopt()
    click.echo(f"stored as the settings of prefix {options.prefix!r}")


def _readable(tier: WebTier) -> DeploymentSettings | None:
    """The stored settings, None if unreadable (adopt replaces them), an
    error if another key layout wrote them."""
    try:
        found = tier.deployment.stored()
    except ConfigError as error:
        click.echo(f"replacing them: {error}", err=True)
        return None
    if found is not None and found.version != VERSION:
        raise click.ClickException(
            f"the stored settings are of key layout version {found.version}, this webtier's "
            f"is {VERSION}: run a webtier of the deployment's version, or `webtier settings reset`"
        )
    return found


@settings.command("reset")
@deletes
@pass_options
def settings_reset(options: SharedOptions, yes: bool, dry_run: bool) -> None:
    """Remove the stored settings: the next writer's become the deployment's."""
    with _tier(options) as tier:
        try:
            found = tier.deployment.stored()
        except ConfigError:  # unreadable, or of another webtier: what reset is for
            found = None
        else:
            if found is None:
                click.echo(f"no settings are stored under {options.prefix!r}")
                return
        version = "" if found is None else f" (key layout version {found.version})"
        what = (
            f"the stored settings of prefix {options.prefix!r}{version}; the next process "
            "that writes stores its own"
        )
        if not confirm_deletion(what, yes=yes, dry_run=dry_run):
            return
        removed = tier.deployment.reset()
    click.echo("removed" if removed else f"no settings were stored under {options.prefix!r}")
