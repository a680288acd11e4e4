"""Suite-wide settings: results and logs of a test run go to a temporary folder; on two workers, each
test file stays on one worker and the files that need the cores (or take them) run one after another."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

# Files that measure what the cores do under load (Ray Serve's autoscaler must see a backlog and act on
# it in seconds) or that keep the cores busy for a minute (pip resolving images, a venv built: Model
# Analyzer's, where it is missing): with `pytest -n 2 --dist loadfile` (./lab test) they run on one
# worker, one after another. Why:
# docs/decisions/2026-11-25-ci-ray-contention.md
CORES = ("tests/unit/targets/test_controller.py", "tests/unit/targets/test_image_resolution.py",
         "tests/integration/scaling/", "tests/unit/triton/test_model_analyzer.py")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with the ``CORES`` files as one unit of work (pytest-xdist's own
    ``xdist_group`` marks have no effect under pytest 9.2: the group goes into a node id no longer read)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class CoresTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "cores" if path.startswith(CORES) else path

    return CoresTogether(config, log)


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
