"""One headless run of the whole lab per test session, through the main command's own code path."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.lab import runner as lab


@pytest.fixture(scope="session")
def lab_run(tmp_path_factory: pytest.TempPathFactory) -> lab.RunOutcome:
    """``python -m servelab.lab run --preset quick --target local``, once, into a temporary results folder."""
    base = tmp_path_factory.mktemp("lab-results")
    return lab.run(preset="quick", target="local", results_base=base)


@pytest.fixture(scope="session")
def run_dir(lab_run: lab.RunOutcome) -> Path:
    return lab_run.run_dir
