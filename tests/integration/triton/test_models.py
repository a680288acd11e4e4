"""Both lab models load on the real Triton and answer like the reference computation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from servelab.core.labels import CLASSES
from servelab.core.paths import STAGING_DIR
from servelab.core.preprocess import preprocess_bytes, softmax


@pytest.fixture(scope="module")
def reference(samples: list[Path]) -> dict[str, np.ndarray]:
    """Logits from the PyTorch model loaded directly, as the FastAPI PyTorch service computes them."""
    import torch

    from servelab.core.model import load_model

    model = load_model(STAGING_DIR / "food_classifier" / "1" / "food11.pth")
    batch = np.stack([preprocess_bytes(p.read_bytes()) for p in samples[:4]])
    with torch.inference_mode():
        logits = model(torch.from_numpy(batch)).numpy()
    return {"batch": batch, "logits": logits}


def test_food_classifier_matches_reference(triton, samples, reference, tri) -> None:
    client = triton.client()
    probs = softmax(reference["logits"])
    for i, path in enumerate(samples[:4]):
        labels, prob = tri.classify(client, [tri.b64(path)])
        assert labels == [CLASSES[int(np.argmax(probs[i]))]]
        assert abs(float(prob[0]) - float(probs[i].max())) < 1e-4, "not the true softmax probability"


def test_client_batch_and_raw_bytes(triton, samples, reference, tri) -> None:
    """A request carrying 3 images (one as raw JPEG bytes) is answered per image, in order."""
    items = [tri.b64(samples[0]), samples[1].read_bytes(), tri.b64(samples[2])]
    labels, prob = tri.classify(triton.client(), items)
    probs = softmax(reference["logits"][:3])
    assert labels == [CLASSES[int(i)] for i in probs.argmax(axis=1)]
    np.testing.assert_allclose(prob, probs.max(axis=1), atol=1e-4)


def test_onnx_model_matches_reference(triton, reference, tri) -> None:
    result = triton.client().infer("food_classifier_onnx", [tri.tensor_input(reference["batch"])])
    logits = result.as_numpy("output")
    assert logits.shape == (4, len(CLASSES))
    np.testing.assert_allclose(softmax(logits), softmax(reference["logits"]), atol=1e-4)


@pytest.mark.parametrize("bad", [b"not base64 at all!!", b"aGVsbG8gd29ybGQ=", b""])
def test_bad_image_is_an_error_and_the_model_stays_up(triton, samples, tri, bad) -> None:
    client = triton.client()
    with pytest.raises(InferenceServerException, match="bad image"):
        tri.classify(client, [bad])
    labels, _ = tri.classify(client, [tri.b64(samples[0])])
    assert labels and triton.model_ready("food_classifier")


def test_deployed_configs_are_cpu_and_onnx_runs_through_python(triton) -> None:
    from servelab.triton.config import live_config, summary

    classifier = summary(live_config(triton, "food_classifier"))
    onnx = summary(live_config(triton, "food_classifier_onnx"))
    assert classifier["instances"] == "1xKIND_CPU" and classifier["max_batch_size"] == 16
    assert onnx["backend"] == "python" and onnx["instances"] == "1xKIND_CPU"
    metadata = triton.client().get_model_metadata("food_classifier_onnx")
    assert [(i["name"], i["datatype"], i["shape"]) for i in metadata["inputs"]] == [
        ("input", "FP32", [-1, 3, 224, 224])]
    assert (Path(triton.repository) / "food_classifier_onnx" / "1" / "model.py").is_file()
