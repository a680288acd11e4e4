"""Triton's answers match the FastAPI services' answers on the same images (within 1e-4)."""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from servelab.core.labels import CLASSES
from servelab.core.preprocess import preprocess_bytes, softmax
from servelab.targets.services import start_fastapi


@pytest.fixture(scope="module")
def fastapi_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    logs = tmp_path_factory.mktemp("fastapi-logs")
    services = []
    try:
        for kind in ("pt", "onnx"):
            services.append(start_fastapi(kind, log_dir=logs))
        yield {"pt": services[0].url, "onnx": services[1].url}
    finally:
        for service in services:
            service.stop()


def _fastapi_predict(url: str, path: Path) -> tuple[str, float]:
    body = json.dumps({"image": base64.b64encode(path.read_bytes()).decode()}).encode()
    request = urllib.request.Request(f"{url}/predict", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        answer = json.loads(reply.read())
    return answer["prediction"], float(answer["probability"])


def test_both_triton_models_agree_with_fastapi(triton, samples, fastapi_urls, tri) -> None:
    client = triton.client()
    for path in samples[:3]:
        pt_label, pt_prob = _fastapi_predict(fastapi_urls["pt"], path)
        labels, probs = tri.classify(client, [tri.b64(path)])
        assert labels[0] == pt_label and abs(float(probs[0]) - pt_prob) < 1e-4

        onnx_label, onnx_prob = _fastapi_predict(fastapi_urls["onnx"], path)
        logits = client.infer("food_classifier_onnx",
                              [tri.tensor_input(preprocess_bytes(path.read_bytes())[None])]).as_numpy("output")
        probs = softmax(logits[0])
        assert CLASSES[int(np.argmax(probs))] == onnx_label and abs(float(probs.max()) - onnx_prob) < 1e-4
