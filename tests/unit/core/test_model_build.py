"""The model artefacts: present, the right shapes, PyTorch == ONNX, and the trained-weights option."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from servelab.core.labels import NUM_CLASSES
from servelab.core.model import (
    AGREEMENT_TOLERANCE,
    BuildError,
    build_architecture,
    check_agreement,
    destinations,
    load_model,
    load_state_dict_file,
)
from servelab.core.paths import ARTIFACTS_DIR, MANIFEST_NAME, ONNX_NAME, PT_WEIGHTS_NAME, REPO_ROOT
from servelab.core.preprocess import preprocess_batch
from servelab.core.samples import synthetic_food_image

PT_FILE = ARTIFACTS_DIR / PT_WEIGHTS_NAME
ONNX_FILE = ARTIFACTS_DIR / ONNX_NAME
BUILD_TIMEOUT_S = 300


def test_artefacts_exist_where_the_services_load_them() -> None:
    for path in [PT_FILE, ONNX_FILE, *(p for paths in destinations().values() for p in paths)]:
        assert path.is_file(), f"{path} is missing: run python -m servelab.core.model build"
    manifest = json.loads((ARTIFACTS_DIR / MANIFEST_NAME).read_text())
    assert manifest["onnx_max_abs_diff"] <= AGREEMENT_TOLERANCE


def test_onnx_signature_and_dynamic_batch() -> None:
    session = ort.InferenceSession(str(ONNX_FILE), providers=["CPUExecutionProvider"])
    (inp,), (out,) = session.get_inputs(), session.get_outputs()
    assert (inp.name, inp.type, inp.shape[1:]) == ("input", "tensor(float)", [3, 224, 224])
    assert (out.name, out.shape[1]) == ("output", NUM_CLASSES)
    assert isinstance(inp.shape[0], str), "batch dimension must be dynamic"
    for batch in (1, 5):
        logits = session.run(["output"], {"input": np.zeros((batch, 3, 224, 224), np.float32)})[0]
        assert logits.shape == (batch, NUM_CLASSES)


def test_pytorch_and_onnx_agree_and_are_not_degenerate() -> None:
    model = load_model(PT_FILE)
    batch = preprocess_batch([synthetic_food_image(500 + i, label=i) for i in range(NUM_CLASSES)])
    with torch.no_grad():
        expected = model(torch.from_numpy(batch)).numpy()
    session = ort.InferenceSession(str(ONNX_FILE), providers=["CPUExecutionProvider"])
    got = session.run(["output"], {"input": batch})[0]
    assert np.abs(expected - got).max() <= AGREEMENT_TOLERANCE
    assert len(set(expected.argmax(axis=1))) >= 5, "the stand-in should tell drawn classes apart"
    assert np.ptp(expected, axis=1).min() > 0.1, "logits must not all tie"


def test_agreement_check_fails_loudly_on_a_mismatch() -> None:
    model = load_model(PT_FILE)
    with torch.no_grad():
        model.classifier[-1].bias += 0.01  # a PyTorch model that no longer matches the ONNX file
    with pytest.raises(BuildError, match="differ by"):
        check_agreement(model, ONNX_FILE)


def test_a_pickled_module_is_refused_unless_trusted_by_its_sha256(tmp_path: Path) -> None:
    """Issue 50: the original lab publishes its food11.pth as a whole pickled model. Unpickling runs what
    the file carries, so it is refused, naming the file's sha256 to trust; trusted by that sha256 (and no
    other), only its state_dict is kept."""
    from servelab.core.model import TRUST_VARIABLE, file_sha256

    path = tmp_path / "whole_module.pth"
    model = build_architecture()
    torch.save(model, path)
    digest = file_sha256(path)
    with pytest.raises(BuildError, match=f"needs unpickling.*refused.*{TRUST_VARIABLE}={digest}"):
        load_state_dict_file(path)
    with pytest.raises(BuildError, match="not this file's"):
        load_state_dict_file(path, trusted="0" * 64)
    state = load_state_dict_file(path, trusted=digest)
    assert state.keys() == model.state_dict().keys()
    assert torch.equal(state["classifier.1.weight"], model.state_dict()["classifier.1.weight"])


def _build_cli(tmp_path: Path, weights: Path) -> subprocess.CompletedProcess[str]:
    """``python -m servelab.core.model build --weights`` with a temporary output and checkout root."""
    env = {**os.environ, "SERVELAB_ROOT": str(tmp_path / "root")}
    return subprocess.run(
        [sys.executable, "-m", "servelab.core.model", "build", "--weights", str(weights),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=BUILD_TIMEOUT_S,
    )


@pytest.mark.slow
def test_build_with_trained_weights_file(tmp_path: Path) -> None:
    weights = tmp_path / "trained.pth"
    weights.write_bytes(PT_FILE.read_bytes())  # any MobileNetV2-11 state_dict stands for "trained"
    result = _build_cli(tmp_path, weights)
    assert result.returncode == 0, result.stderr
    out, root = tmp_path / "out", tmp_path / "root"
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["source"] == str(weights) and manifest["onnx_max_abs_diff"] <= AGREEMENT_TOLERANCE
    for path in [p for paths in destinations(root).values() for p in paths]:
        assert path.is_file(), f"build did not copy to {path}"
    assert torch.equal(load_model(root / "fastapi_pt" / PT_WEIGHTS_NAME).classifier[-1].weight,
                       load_model(PT_FILE).classifier[-1].weight)


def test_wrong_shape_weights_fail_clearly(tmp_path: Path) -> None:
    from torchvision.models import mobilenet_v2

    weights = tmp_path / "ten_classes.pth"
    torch.save(mobilenet_v2(weights=None, num_classes=10).state_dict(), weights)
    result = _build_cli(tmp_path, weights)
    assert result.returncode == 1
    assert f"does not fit MobileNetV2 with {NUM_CLASSES} outputs" in result.stderr
    assert not (tmp_path / "root" / "fastapi_pt" / PT_WEIGHTS_NAME).exists()
