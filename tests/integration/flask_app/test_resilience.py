"""A backend that goes away, hangs or errors costs a 503, never the app; when it
comes back the very next upload works, without restarting the app.

The app runs under gunicorn here (as ``servelab.targets.services.start_flask`` starts
it for the lab), so the threads and the reused client are the real ones.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from servelab.core.procs import free_port
from servelab.targets.services import Service, start_fastapi, start_flask

NEXT_REQUEST_TIMEOUT = 60.0


def upload(flask: Service, path: Path, route: str = "/api/predict") -> httpx.Response:
    with path.open("rb") as handle:
        return httpx.post(f"{flask.url}{route}", files={"file": (path.name, handle, "image/jpeg")},
                          timeout=NEXT_REQUEST_TIMEOUT)


def backend_reachable(flask: Service) -> bool:
    response = httpx.get(f"{flask.url}/health", timeout=10)
    assert response.status_code == 200, "GET /health must answer 200 whenever the app is up"
    return bool(response.json()["backend_reachable"])


@pytest.fixture
def instance(tmp_path: Path) -> Path:
    return tmp_path / "instance"


def test_fastapi_stopped_then_restarted_on_same_port(log_dir: Path, instance: Path,
                                                     samples: list[Path]) -> None:
    port = free_port()
    backend = start_fastapi("onnx", port=port, log_dir=log_dir)
    flask = start_flask({"PREDICT_BACKEND": "fastapi", "FASTAPI_SERVER_URL": backend.url,
                         "REQUEST_TIMEOUT": "10", "INSTANCE_PATH": str(instance)}, log_dir=log_dir)
    try:
        first = upload(flask, samples[0])
        assert first.status_code == 200, first.text
        with ThreadPoolExecutor(8) as pool:  # gunicorn threads share the one httpx client
            answers = list(pool.map(lambda _: upload(flask, samples[0]), range(8)))
        assert [a.status_code for a in answers] == [200] * 8, [a.text for a in answers]

        backend.stop()
        down = upload(flask, samples[0])
        assert down.status_code == 503
        assert "prediction service is unavailable" in down.json()["error"]
        page = upload(flask, samples[0], route="/predict")
        assert page.status_code == 503 and "unavailable" in page.text
        assert not backend_reachable(flask)

        backend = start_fastapi("onnx", port=port, log_dir=log_dir)
        assert backend_reachable(flask)
        again = upload(flask, samples[0])
        assert again.status_code == 200, again.text
        assert again.json()["prediction"] == first.json()["prediction"]
        assert len(list((instance / "uploads").iterdir())) == 12, "every upload is kept, failed ones too"
    finally:
        flask.stop()
        backend.stop()


@pytest.fixture
def silent_backend() -> Iterator[str]:
    """A socket that accepts connections and never answers: the slowest possible backend."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("backend", ["fastapi", "triton", "triton_onnx"])
def test_slow_backend_times_out_with_503(make_client, silent_backend: str, samples: list[Path],
                                         backend: str) -> None:
    client = make_client(backend=backend, fastapi_url=silent_backend, triton_url=silent_backend,
                         request_timeout=1.0)
    for _attempt in range(2):  # the second call proves a timed-out client is replaced, not stuck
        start = time.monotonic()
        with samples[0].open("rb") as handle:
            response = client.post("/api/predict", data={"file": (handle, "a.jpg")})
        elapsed = time.monotonic() - start
        assert response.status_code == 503
        assert "unavailable" in response.get_json()["error"]
        assert elapsed < 8, f"REQUEST_TIMEOUT=1 s but the app waited {elapsed:.1f} s"
    health = client.get("/health")
    assert health.status_code == 200 and health.get_json()["backend_reachable"] is False


def test_app_starts_and_reports_health_while_backend_hangs(silent_backend: str, log_dir: Path,
                                                           instance: Path) -> None:
    """The ready-wait polls GET /health with a 2 s timeout: a hanging backend must not stall it."""
    flask = start_flask({"PREDICT_BACKEND": "fastapi", "FASTAPI_SERVER_URL": silent_backend,
                         "REQUEST_TIMEOUT": "30", "INSTANCE_PATH": str(instance)}, log_dir=log_dir)
    try:
        start = time.monotonic()
        assert not backend_reachable(flask)
        assert time.monotonic() - start < 2.0
    finally:
        flask.stop()


@pytest.fixture
def triton_restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A Triton of its own (this test stops it), serving the ONNX model."""
    from servelab.triton.repository import deploy_model
    from servelab.triton.server import TritonServer

    repository = tmp_path_factory.mktemp("triton-restart")
    deploy_model("food_classifier_onnx", repository, gpu=False, quiet=True)
    logs = tmp_path_factory.mktemp("triton-restart-logs")
    servers = [TritonServer(repository, log_path=logs / "first.log").start(timeout=180)]
    servers[0].load("food_classifier_onnx", timeout=180)
    state = {"repository": repository, "servers": servers, "logs": logs}
    yield state
    for server in state["servers"]:
        server.stop()


def test_triton_erroring_stopped_and_restarted(triton_restartable: dict, log_dir: Path, instance: Path,
                                               samples: list[Path]) -> None:
    from servelab.triton.server import TritonServer

    server = triton_restartable["servers"][0]
    flask = start_flask({"PREDICT_BACKEND": "triton_onnx", "TRITON_SERVER_URL": server.url,
                         "REQUEST_TIMEOUT": "10", "INSTANCE_PATH": str(instance)}, log_dir=log_dir)
    try:
        first = upload(flask, samples[1])
        assert first.status_code == 200, first.text
        with ThreadPoolExecutor(8) as pool:  # gunicorn threads share the one Triton client
            answers = list(pool.map(lambda _: upload(flask, samples[1]), range(8)))
        assert [a.status_code for a in answers] == [200] * 8, [a.text for a in answers]
        assert {a.json()["prediction"] for a in answers} == {first.json()["prediction"]}

        server.unload("food_classifier_onnx")  # server up, model gone: Triton answers with an error
        wait_model_gone(server.url)
        erroring = upload(flask, samples[1])
        assert erroring.status_code == 503, erroring.text
        assert not backend_reachable(flask)

        server.stop()
        assert upload(flask, samples[1]).status_code == 503

        again = TritonServer(triton_restartable["repository"], http_port=server.http_port,
                             log_path=triton_restartable["logs"] / "second.log")
        triton_restartable["servers"].append(again)
        again.start(timeout=180).load("food_classifier_onnx", timeout=180)
        second = upload(flask, samples[1])
        assert second.status_code == 200, second.text
        assert second.json()["prediction"] == first.json()["prediction"]
        assert second.json()["backend"] == "triton_onnx"
    finally:
        flask.stop()


def wait_model_gone(url: str, timeout: float = 30.0) -> None:
    """Unloading is asynchronous in Triton; wait until the model reports not ready."""
    from servelab.core.procs import http_ok, wait_until

    wait_until(lambda: not http_ok(f"http://{url}/v2/models/food_classifier_onnx/ready"),
               "food_classifier_onnx to be unloaded", timeout)
