"""Suite-wide settings: results and logs of a test run go to a temporary folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


@pytest.fixture(autouse=True, scope="session")
def _isolated_results(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep a test run's measurements out of the user's results/ folder."""
    os.environ.setdefault("SERVELAB_RESULTS", str(tmp_path_factory.mktemp("results")))


@pytest.fixture(autouse=True, scope="session")
def _no_gpu_runtime_probe() -> None:
    """Compose stacks built in tests record their commands: they run as on a host without GPUs
    unless a test says otherwise (the probe itself is tested; the docker tier asks its engine)."""
    os.environ.setdefault("SERVELAB_DOCKER_GPU", "0")


@pytest.fixture(scope="session")
def artifact_dir() -> Path:
    """Where tests keep what a person may want to look at afterwards (screenshots, logs)."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
