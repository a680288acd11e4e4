"""Fixtures for GourmetGram's tests: real backends on 127.0.0.1, one per module.

Starting a backend costs seconds (Triton: tens of seconds on a shared CPU), so
each is module-scoped; tests that stop a backend on purpose start their own.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from flask.testing import FlaskClient

from flask_app.app import create_app
from flask_app.settings import Settings
from servelab.core.samples import sample_paths
from servelab.targets.services import Service, start_fastapi

SAMPLE_COUNT = 3  # images per backend comparison: enough to catch a mixed-up label, cheap on CPU


@pytest.fixture(scope="session")
def samples() -> list[Path]:
    paths = sample_paths()
    assert len(paths) >= SAMPLE_COUNT, "data/samples is missing its food_XX.jpg stand-in photos"
    return paths[:SAMPLE_COUNT]


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logs")


@pytest.fixture(scope="module")
def fastapi_onnx(log_dir: Path) -> Iterator[Service]:
    service = start_fastapi("onnx", log_dir=log_dir)
    yield service
    service.stop()


@pytest.fixture(scope="module")
def fastapi_pt(log_dir: Path) -> Iterator[Service]:
    service = start_fastapi("pt", log_dir=log_dir)
    yield service
    service.stop()


@pytest.fixture
def make_client(tmp_path: Path) -> Callable[..., FlaskClient]:
    """A Flask test client for settings given as keywords; uploads go to a temp instance folder."""

    def build(**settings: object) -> FlaskClient:
        app = create_app(Settings(instance_path=tmp_path / "instance", **settings))  # type: ignore[arg-type]
        app.config["TESTING"] = True
        return app.test_client()

    return build


def _fastapi_direct(url: str, path: Path) -> tuple[str, float]:
    """What the FastAPI service itself answers for ``path`` (the reference for the app)."""
    payload = {"image": base64.b64encode(path.read_bytes()).decode("ascii")}
    response = httpx.post(f"{url}/predict", json=payload, timeout=60)
    response.raise_for_status()
    body = response.json()
    return body["prediction"], float(body["probability"])


def _triton_direct(url: str, model: str, path: Path) -> tuple[str, float]:
    """What Triton itself answers for ``path``: the reference for the app's Triton clients."""
    import tritonclient.http as httpclient

    from servelab.core.preprocess import preprocess_bytes, top1

    client = httpclient.InferenceServerClient(url, network_timeout=120.0)
    try:
        if model == "food_classifier_onnx":
            tensor = preprocess_bytes(path.read_bytes())[np.newaxis]
            request = httpclient.InferInput("input", list(tensor.shape), "FP32")
            request.set_data_from_numpy(tensor)
            return top1(client.infer(model, [request]).as_numpy("output")[0])
        text = np.array([[base64.b64encode(path.read_bytes()).decode("ascii")]], dtype=object)
        request = httpclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")
        request.set_data_from_numpy(text)
        result = client.infer(model, [request])
        label = result.as_numpy("FOOD_LABEL").reshape(-1)[0]
        return label.decode() if isinstance(label, bytes) else str(label), \
            float(result.as_numpy("PROBABILITY").reshape(-1)[0])
    finally:
        client.close()


@pytest.fixture(scope="session")
def fastapi_direct() -> Callable[[str, Path], tuple[str, float]]:
    """``(url, image path) -> (label, probability)`` straight from a FastAPI service."""
    return _fastapi_direct


@pytest.fixture(scope="session")
def triton_direct() -> Callable[[str, str, Path], tuple[str, float]]:
    """``(url, model, image path) -> (label, probability)`` straight from Triton."""
    return _triton_direct


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real local Triton serving both lab models (CPU-adapted, as the notebooks deploy them)."""
    from servelab.triton.repository import deploy_all
    from servelab.triton.server import TritonServer

    repository = tmp_path_factory.mktemp("triton-models")
    deploy_all(repository, gpu=False, quiet=True)
    server = TritonServer(repository, log_path=tmp_path_factory.mktemp("triton-logs") / "triton.log")
    server.start(timeout=180)
    try:
        for model in ("food_classifier", "food_classifier_onnx"):
            server.load(model, timeout=180)
        yield server
    finally:
        server.stop()
