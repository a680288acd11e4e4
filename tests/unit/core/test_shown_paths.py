"""What a notebook prints carries no machine's absolute paths (issue 36): the run's folder, the
interpreter's environment, the checkout and the home folder each read as a student would type them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from servelab.core.paths import REPO_ROOT, shown


def test_known_folders_read_short(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SERVELAB_RESULTS", str(tmp_path / "run"))
    home = os.path.expanduser("~")
    text = (f"{sys.prefix}/bin/tritonserver --model-repository={tmp_path}/run/host/models "
            f"--backend-directory={home}/.cache/servelab/x --chdir {REPO_ROOT} {REPO_ROOT}/models_staging/a "
            f"{REPO_ROOT}-other/b")
    assert shown(text) == (".venv/bin/tritonserver --model-repository=$SERVELAB_RESULTS/host/models "
                           "--backend-directory=~/.cache/servelab/x --chdir . models_staging/a "
                           f"{REPO_ROOT}-other/b")  # a folder that only starts like the checkout: kept


def test_a_system_pythons_paths_stay_real(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a virtual environment reads ``.venv``: /usr/bin/nvidia-smi under the Debian Python is itself."""
    monkeypatch.setattr(sys, "prefix", "/usr")
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    command = "/usr/bin/nvidia-smi -L; /usr/local/bin/python3"
    assert shown(command) == command
