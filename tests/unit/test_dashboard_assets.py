"""The dashboard's files: uPlot as scripts/vendor_charts.sh pins it, with its
licence; a page and a script that a CSP without inline code allows."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

# The dashboard is a Starlette app (webtier[dashboard]): without it, as with
# only the non-web part of .[test], this module skips (a failure in CI).
pytest.importorskip("starlette")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = resources.files("webtier.web.dashboard")
VENDOR = PACKAGE / "static" / "vendor" / "uplot"


def test_uplot_is_the_pinned_release_with_its_licence() -> None:
    script = (ROOT / "scripts" / "vendor_charts.sh").read_text("utf-8")
    version = re.search(r"^VERSION=(\S+)$", script, re.MULTILINE)
    integrity = re.search(r"^INTEGRITY=(\S+)$", script, re.MULTILINE)
    assert version
    assert integrity
    stamp = (VENDOR / "VERSION").read_text("utf-8")
    assert stamp.startswith(f"uPlot {version[1]} ")
    assert integrity[1] in stamp
    assert "MIT License" in (VENDOR / "LICENSE").read_text("utf-8")
    assert (
        (VENDOR / "uPlot.iife.min.js")
        .read_text("utf-8")
        .startswith("/*! https://github.com/leeoniya/uPlot")
    )


def test_the_page_has_no_inline_code() -> None:
    page = (PACKAGE / "templates" / "dashboard.html").read_text("utf-8")
    scripts = re.findall(r"<script\b[^>]*>", page)
    assert scripts
    assert all("src=" in tag for tag in scripts)
    assert "<style" not in page
    assert " style=" not in page
    assert not re.search(r"\son[a-z]+=", page)  # no inline event handlers


def test_the_script_writes_text_not_html() -> None:
    code = (PACKAGE / "static" / "dashboard.js").read_text("utf-8")
    for risky in ("innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function"):
        assert risky not in code, risky
