"""Fixtures of the fault suite: the test certificate, and the figures the
fault tests measure (recovery times, outcomes, inputs tried), printed at the
end of the run and written to ``.pytest_figures/faults.json``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.figures import FIGURES, Figures
from tests.faults.servers import Certificate, make_certificate


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    return make_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def figures() -> Figures:
    return FIGURES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not FIGURES.rows:
        return
    path = FIGURES.write(Path(str(terminalreporter.config.rootpath)) / ".pytest_figures")
    terminalreporter.section("fault suite figures")
    for line in FIGURES.table():
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"(written to {path})")
