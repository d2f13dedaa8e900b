"""What the wheel holds and what the checkout adds: ``webtier bench`` runs
the repository's ``benchmarks`` package, found beside ``src/``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Run from elsewhere, so the checkout is not on sys.path as the current directory.
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=cwd
    )


def test_webtier_bench_finds_the_checkouts_benchmarks(tmp_path: Path) -> None:
    done = python(
        "import sys\n"
        "sys.argv = ['webtier', 'bench', '--help']\n"
        "from webtier.__main__ import main\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print(sys.modules['benchmarks'].__file__)\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "counters" in done.stdout
    checkout = Path(__file__).resolve().parents[2]
    assert done.stdout.splitlines()[-1] == str(checkout / "benchmarks" / "__init__.py")


def test_without_the_checkout_bench_says_where_it_comes_from(tmp_path: Path) -> None:
    done = python(
        "from webtier.cli.bench import load\n"
        "import click\n"
        "try:\n"
        "    load(None)\n"
        "except click.ClickException as error:\n"
        "    print(error.message)\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("webtier bench comes with the repository checkout")
