"""``webtier completion bash|zsh|fish``: the shell completion script.

Click completes from the ``_WEBTIER_COMPLETE`` environment variable; this
command prints the script that sets it up, to ``eval`` or save, e.g.
``eval "$(webtier completion bash)"`` in ``~/.bashrc``.
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

PROG_NAME = "webtier"
COMPLETE_VAR = "_WEBTIER_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script of SHELL: eval "$(webtier completion bash)"
    in ~/.bashrc (zsh: ~/.zshrc; fish: webtier completion fish | source)."""
    from webtier.cli.group import main

    script_class = get_completion_class(shell)
    if script_class is None:  # pragma: no cover - click ships all three
        raise click.ClickException(f"click has no completion for {shell}")
    click.echo(script_class(main, {}, PROG_NAME, COMPLETE_VAR).source())
