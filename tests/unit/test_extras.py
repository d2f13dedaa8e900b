"""Optional dependencies: ``import webtier`` stays light, and a missing extra
is one line naming it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from webtier._core.extras import PROVIDES, extra_needed
from webtier.errors import MissingExtra, WebtierError

# What only an extra brings: none of it may be imported by ``import webtier``.
HEAVY = sorted(set().union(*PROVIDES.values()) | {"starlette", "anyio"})


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_import_webtier_imports_nothing_heavy() -> None:
    done = python(
        "import sys, webtier\n"
        f"print(sorted({{m.partition('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_missing_extra_is_one_line_naming_it() -> None:
    # None in sys.modules makes Python refuse the import, as if not installed.
    done = python(
        "import sys\n"
        "sys.modules['sqlalchemy'] = None\n"
        "try:\n"
        "    from webtier.rows.sql import SqlSource\n"
        "except ImportError as error:\n"
        "    print(type(error).__name__, error, sep=': ')\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "MissingExtra: webtier[sql] is needed for SQL row sources: pip install 'webtier[sql]'\n"
    )


def test_missing_extra_is_a_webtier_error_and_an_import_error() -> None:
    with pytest.raises(MissingExtra) as caught, extra_needed("web", "the ASGI middleware"):
        raise ModuleNotFoundError("No module named 'starlette.types'", name="starlette.types")
    assert isinstance(caught.value, WebtierError)
    assert isinstance(caught.value, ImportError)
    assert (caught.value.extra, caught.value.name) == ("web", "starlette")


def test_a_module_no_extra_provides_keeps_its_error() -> None:
    with pytest.raises(ModuleNotFoundError) as caught, extra_needed("sql", "SQL row sources"):
        raise ModuleNotFoundError("No module named 'nonesuch'", name="nonesuch")
    assert not isinstance(caught.value, MissingExtra)


def webtier_command(*args: str, blocked: str | None = None) -> subprocess.CompletedProcess[str]:
    """The ``webtier`` console script's entry point, with one module made
    unimportable (as if its extra were not installed); it prints which of the
    heavy modules it imported."""
    block = "" if blocked is None else f"sys.modules[{blocked!r}] = None\n"
    return python(
        "import atexit, sys\n"
        f"{block}"
        f"sys.argv = ['webtier', *{list(args)!r}]\n"
        "atexit.register(lambda: print(sorted({m.partition('.')[0] for m in sys.modules}\n"
        f"    & set({HEAVY!r})), 'benchmarks' in sys.modules))\n"
        "from webtier.__main__ import main\n"
        "main()\n"
    )


def test_webtier_help_imports_no_sql_web_or_bench() -> None:
    done = webtier_command("--help")
    assert done.returncode == 0, done.stderr
    assert "bench" in done.stdout
    assert done.stdout.splitlines()[-1] == "['click'] False"


def test_the_command_without_the_cli_extra_is_one_line() -> None:
    done = webtier_command("--help", blocked="click")
    assert done.returncode == 2
    assert done.stderr == (
        "error: webtier[cli] is needed for the webtier command: pip install 'webtier[cli]'\n"
    )


def test_a_command_without_its_extra_is_one_line() -> None:
    done = webtier_command("rows", "init", blocked="sqlalchemy")
    assert done.returncode == 2
    assert done.stderr == (
        "error: webtier[sql] is needed for the row cache commands: pip install 'webtier[sql]'\n"
    )


@pytest.mark.parametrize(
    ("missing", "module", "line"),
    [
        (
            "prometheus_client",
            "webtier.metrics",
            "webtier[metrics] is needed for the metrics exposition",
        ),
        ("jinja2", "webtier.web.dashboard", "webtier[dashboard] is needed for the dashboard"),
        ("starlette_csrf", "webtier.web.dashboard", None),  # only for actions: imported then
    ],
)
def test_the_dashboard_and_metrics_name_their_extra(
    missing: str, module: str, line: str | None
) -> None:
    if line is None:  # the dashboard imports, so its other extras must be there
        pytest.importorskip("starlette")
        pytest.importorskip("jinja2")
    done = python(
        "import sys\n"
        f"sys.modules[{missing!r}] = None\n"
        "try:\n"
        f"    import {module}\n"
        "except ImportError as error:\n"
        "    print(type(error).__name__, error, sep=': ')\n"
    )
    assert done.returncode == 0, done.stderr
    if line is None:
        assert done.stdout == ""
    else:
        assert done.stdout.startswith(f"MissingExtra: {line}: pip install")
