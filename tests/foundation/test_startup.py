"""How the services start: a missing model or a bad setting stops them at once; no torch on the ONNX path."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from servelab.core.paths import BUILD_COMMAND, REPO_ROOT
from servelab.core.procs import free_port
from servelab.core.samples import sample_paths

EXIT_TIMEOUT_S = 60  # "at once": no model load, no waiting for requests


def _uvicorn(kind: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "uvicorn", f"fastapi_{kind}.app:app", "--host", "127.0.0.1",
            "--port", str(free_port())]
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO_ROOT,
                          env={**os.environ, **env}, timeout=EXIT_TIMEOUT_S)


@pytest.mark.parametrize("kind", ["pt", "onnx"])
def test_missing_model_file_exits_naming_path_and_build_command(kind: str, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model.file"
    result = _uvicorn(kind, {"MODEL_PATH": str(missing)})
    assert result.returncode != 0
    assert str(missing) in result.stderr and BUILD_COMMAND in result.stderr, result.stderr[-2000:]


def test_a_bad_setting_exits_with_its_name() -> None:
    result = _uvicorn("onnx", {"MAX_BATCH": "lots"})
    assert result.returncode != 0
    assert "MAX_BATCH" in result.stderr and "not an integer" in result.stderr, result.stderr[-2000:]


NO_TORCH_SCRIPT = """
import sys
from starlette.testclient import TestClient
import fastapi_onnx.app as service
with TestClient(service.app) as client:
    response = client.post("/predict", json={"image": sys.argv[1]})
    assert response.status_code == 200, response.text
    assert client.get("/health").json()["backend"] == "onnxruntime"
loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith(("torch.", "torchvision")))
print("TORCH MODULES:", loaded)
sys.exit(1 if loaded else 0)
"""


def test_onnx_app_imports_and_serves_without_torch() -> None:
    image = base64.b64encode(sample_paths()[0].read_bytes()).decode()
    result = subprocess.run([sys.executable, "-c", NO_TORCH_SCRIPT, image], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
