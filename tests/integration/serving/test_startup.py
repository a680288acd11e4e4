"""How the services start: nothing at import, the model in the lifespan; a missing model or a bad setting
stops them at once with one line; no torch on the ONNX path."""

from __future__ import annotations

import base64
import json
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
    assert "Traceback" not in result.stderr, result.stderr[-2000:]


IMPORT_SCRIPT = """
import json, sys, threading
from starlette.testclient import TestClient

def inference_threads():
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("inference-"))

before = threading.active_count()
import fastapi_{kind}.app as service
facts = {{"threads_before": before, "threads_after_import": threading.active_count(),
          "engines_imported": sorted(m for m in ("torch", "onnxruntime") if m in sys.modules)}}
unstarted = TestClient(service.app)  # not entered: the lifespan does not run
health = unstarted.get("/health")
facts["health_before"] = [health.status_code, health.json()]
facts["predict_before"] = unstarted.post("/predict", json={{"image": sys.argv[1]}}).status_code
facts["inference_threads_before"] = inference_threads()
with TestClient(service.app) as started:
    facts["health_after"] = started.get("/health").json()["status"]
    facts["inference_threads_after"] = inference_threads()
print("FACTS", json.dumps(facts))
"""


@pytest.mark.parametrize("kind", ["pt", "onnx"])
def test_importing_the_app_loads_nothing_and_health_waits_for_the_lifespan(kind: str) -> None:
    image = base64.b64encode(sample_paths()[0].read_bytes()).decode()
    result = subprocess.run([sys.executable, "-c", IMPORT_SCRIPT.format(kind=kind), image],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    facts = json.loads(result.stdout.split("FACTS", 1)[1])
    assert facts["threads_after_import"] == facts["threads_before"], "importing the app started a thread"
    assert facts["engines_imported"] == [], "importing the app imported an engine"
    assert facts["health_before"] == [503, {"status": "loading", "model_loaded": False}]
    assert facts["predict_before"] == 503 and facts["inference_threads_before"] == []
    assert facts["health_after"] == "ready"
    assert "inference-0" in facts["inference_threads_after"], "the lifespan starts the inference workers"


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
