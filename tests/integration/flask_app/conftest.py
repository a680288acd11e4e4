"""Fixtures for GourmetGram's tests: real backends on 127.0.0.1, one per module.

Starting a backend costs seconds (Triton: tens of seconds on a shared CPU), so
each is module-scoped; tests that stop a backend on purpose start their own.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    """A real local Triton serving both lab models and notebook 12's ensemble (CPU-adapted, as the notebooks
    deploy them)."""
    from servelab.triton.repository import deploy_all
    from servelab.triton.server import TritonServer

    models = ("food_classifier", "food_classifier_onnx", "food_preprocess", "food_postprocess",
              "food_classifier_ensemble")
    repository = tmp_path_factory.mktemp("triton-models")
    deploy_all(repository, gpu=False, names=models, quiet=True)
    server = TritonServer(repository, log_path=tmp_path_factory.mktemp("triton-logs") / "triton.log")
    server.start(timeout=180)
    try:
        for model in models:
            server.load(model, timeout=180)
        yield server
    finally:
        server.stop()


# ----------------------------------------------------------------------------- a stand-in upstream
MARKUP_LABEL = '<img src=x onerror="window.__gourmetgram_injected=1"><b>Bread</b>'
MARKUP_ERROR = '<script>window.__gourmetgram_injected=2</script><b>model on fire</b>'


@dataclass
class FakeFastAPI:
    """An HTTP server on 127.0.0.1 that answers /predict like the FastAPI service, with set answers.

    ``status`` and ``body`` are what the next POST /predict gets; GET /health is
    always 200. For what no real model says: labels and errors holding markup.
    """

    url: str = ""
    status: int = 200
    body: dict = field(default_factory=lambda: {"prediction": MARKUP_LABEL, "probability": 0.5})


def _handler(fake: FakeFastAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, status: int, body: dict) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._reply(200 if self.path == "/health" else 404, {"status": "ready"})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path == "/predict":
                self._reply(fake.status, fake.body)
            else:
                self._reply(404, {"detail": "Not Found"})

        def log_message(self, *args: object) -> None:  # keep the test output quiet
            pass

    return Handler


@pytest.fixture
def fake_fastapi() -> Iterator[FakeFastAPI]:
    """A stand-in FastAPI service (see ``FakeFastAPI``), stopped after the test."""
    fake = FakeFastAPI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name="fake-fastapi", daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()
    thread.join(10)


@pytest.fixture(scope="session")
def markup() -> dict[str, str]:
    """The label and the error text holding markup that ``fake_fastapi`` answers with."""
    return {"label": MARKUP_LABEL, "error": MARKUP_ERROR}
