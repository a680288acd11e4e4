"""One real Triton server for the whole Triton test session (start + model loads cost seconds).

Tests that change a model's config restore it before they end, so the order
of tests does not matter.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from servelab.core.samples import sample_paths

MODELS = ("food_classifier", "food_classifier_onnx")


@pytest.fixture(scope="session")
def triton(tmp_path_factory: pytest.TempPathFactory, artifact_dir: Path) -> Iterator[object]:
    """A real local Triton serving both lab models, deployed as the notebooks deploy them."""
    from servelab.triton.repository import deploy_all
    from servelab.triton.server import TritonServer

    repository = tmp_path_factory.mktemp("triton-repo")
    deploy_all(repository, gpu=False, quiet=True)
    server = TritonServer(repository, log_path=artifact_dir / "triton-tests.log")
    server.start(timeout=180)
    try:
        for model in MODELS:
            server.load(model, timeout=180)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def samples() -> list[Path]:
    paths = sample_paths()
    assert len(paths) >= 3, "data/samples is missing: run python -m servelab.core.samples"
    return paths


def b64(path: Path) -> bytes:
    return base64.b64encode(Path(path).read_bytes())


def image_input(items: list[bytes]) -> object:
    """INPUT_IMAGE for one request carrying ``items`` (base64 text or raw bytes)."""
    import tritonclient.http as httpclient

    tensor = httpclient.InferInput("INPUT_IMAGE", [len(items), 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[item] for item in items], dtype=np.object_))
    return tensor


def tensor_input(batch: np.ndarray) -> object:
    import tritonclient.http as httpclient

    tensor = httpclient.InferInput("input", list(batch.shape), "FP32")
    tensor.set_data_from_numpy(batch.astype(np.float32))
    return tensor


def classify(client: object, items: list[bytes]) -> tuple[list[str], np.ndarray]:
    result = client.infer("food_classifier", [image_input(items)])  # type: ignore[attr-defined]
    labels = [x.decode() for x in result.as_numpy("FOOD_LABEL").reshape(-1)]
    return labels, result.as_numpy("PROBABILITY").reshape(-1)


@pytest.fixture(scope="session")
def tri() -> object:
    """The helpers above, as a fixture (tests cannot import conftest under importlib mode)."""
    import types

    return types.SimpleNamespace(b64=b64, image_input=image_input, tensor_input=tensor_input,
                                 classify=classify)
