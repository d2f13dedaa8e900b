"""Running the webtier command in tests: through click's runner, with stdout
and stderr apart."""

from __future__ import annotations

from dataclasses import dataclass

from click.testing import CliRunner

from webtier.cli import main


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str


def webtier_cli(*args: str) -> Ran:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)
