"""Global options anywhere: ``webtier rows init --database URL`` as well as
``webtier --database URL rows init``.

The ``webtier`` group declares the options every command shares
(:mod:`webtier.cli.group`); :func:`offer_global_options` gives each command
below it a copy of those that set a field of :class:`SharedOptions`. A copy
has no default and reads no environment variable (the group did both); given
on the command line after the command, it replaces the group's value in the
options the command receives.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from webtier.cli.shared import SharedOptions

SHARED_FIELDS = frozenset(field.name for field in dataclasses.fields(SharedOptions))


def _merger(field: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """The callback of a copy: ``value``, given after the command, replaces
    the shared options' ``field`` for this command."""

    def merge(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        name = param.name
        if name is None or ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
            return
        options = ctx.find_object(SharedOptions)
        if options is None:  # run alone, not under ``webtier``: nothing to merge into
            raise click.UsageError("run it as a command of webtier", ctx)
        ctx.obj = dataclasses.replace(options, **{field: value})

    return merge


def _after_the_command(option: click.Option) -> click.Option:
    """``option`` of the group, as an option of a command below it (named
    apart: ``counters list`` has an argument ``prefix`` of its own)."""
    if option.name is None:  # pragma: no cover - global_options() named it
        raise ValueError(f"unnamed option {option.opts}")
    offered = copy.copy(option)
    offered.name = f"global_{option.name}"
    offered.default = None
    offered.envvar = None
    offered.show_default = False
    offered.show_envvar = False
    offered.required = False
    offered.expose_value = False
    offered.callback = _merger(option.name)
    return offered


def global_options(group: click.Group) -> list[click.Option]:
    """The group's options that set a field of :class:`SharedOptions`."""
    return [
        param
        for param in group.params
        if isinstance(param, click.Option) and param.name in SHARED_FIELDS
    ]


def offer_global_options(command: click.Command, group: click.Group) -> click.Command:
    """Give ``command`` and every command below it ``group``'s global
    options, but those whose flags it already has; returns ``command``."""
    flags = {flag for param in command.params for flag in (*param.opts, *param.secondary_opts)}
    for option in global_options(group):
        if not flags.intersection(option.opts):
            command.params.append(_after_the_command(option))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            offer_global_options(sub, group)
    return command
