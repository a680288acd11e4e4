"""Where things live in a checkout; every location can be overridden by env."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT: Path = Path(os.environ.get("SERVELAB_ROOT", Path(__file__).resolve().parents[2]))
ARTIFACTS_DIR: Path = Path(os.environ.get("SERVELAB_ARTIFACTS", REPO_ROOT / "artifacts"))
RESULTS_DIR: Path = REPO_ROOT / "results"  # runs go here unless $SERVELAB_RESULTS (results.store) says
STAGING_DIR: Path = REPO_ROOT / "models_staging"
SAMPLES_DIR: Path = REPO_ROOT / "data" / "samples"

PT_WEIGHTS_NAME = "food11.pth"
ONNX_NAME = "food11.onnx"
MANIFEST_NAME = "food11.json"

BUILD_COMMAND = "python -m servelab.core.model build"
