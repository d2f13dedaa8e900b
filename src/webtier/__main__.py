"""``python -m webtier`` and the ``webtier`` command.

The entry point imports the command line itself, so that without the
``cli`` extra it says so in one line instead of a traceback.
"""

from __future__ import annotations

import sys

from webtier.errors import MissingExtra


def main() -> None:
    try:
        from webtier.cli import main as command
    except MissingExtra as missing:
        print(f"error: {missing}", file=sys.stderr)
        raise SystemExit(2) from None
    command(prog_name="webtier")


if __name__ == "__main__":
    main()
