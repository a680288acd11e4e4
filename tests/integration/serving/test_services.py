"""Both FastAPI services under real uvicorn: predictions, agreement, every bad input, load, metrics."""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from servelab.core.labels import CLASSES
from servelab.core.model import model_version
from servelab.targets.services import Service

TIMEOUT_S = 60.0
TEST_MAX_PIXELS = 300_000  # the limits conftest.py starts both servers with (checked via /health)
TEST_MAX_BODY_BYTES = 200_000


def _predict(service: Service, body: Any = None, **kwargs: Any) -> httpx.Response:
    if body is not None:
        kwargs["json"] = body
    return httpx.post(f"{service.url}/predict", timeout=TIMEOUT_S, **kwargs)


def _predictions(service: Service, images: list[str]) -> list[dict[str, Any]]:
    results = []
    with httpx.Client(base_url=service.url, timeout=TIMEOUT_S) as client:
        for image in images:
            response = client.post("/predict", json={"image": image})
            assert response.status_code == 200, response.text
            results.append(response.json())
    return results


def test_health_reports_ready(service: Service) -> None:
    health = httpx.get(f"{service.url}/health", timeout=TIMEOUT_S).json()
    assert health["status"] == "ready" and health["model_loaded"] is True
    assert health["device"] == "cpu" and health["backend"] in ("pytorch", "onnxruntime")
    assert health["model_version"] == model_version(Path(health["model_path"]))
    assert health["max_pixels"] == TEST_MAX_PIXELS and health["max_body_bytes"] == TEST_MAX_BODY_BYTES


def test_predictions_on_the_samples(service: Service, sample_b64: list[str]) -> None:
    results = _predictions(service, sample_b64)
    for result in results:
        assert set(result) == {"prediction", "probability"}
        assert result["prediction"] in CLASSES and 0.0 < result["probability"] <= 1.0
    labels = [r["prediction"] for r in results]
    assert len(set(labels)) >= 6, f"the stand-in should tell the samples apart, got {labels}"


def test_pytorch_and_onnx_services_agree(pt_service: Service, onnx_service: Service,
                                         sample_b64: list[str]) -> None:
    pt, onnx = _predictions(pt_service, sample_b64), _predictions(onnx_service, sample_b64)
    for i, (a, b) in enumerate(zip(pt, onnx, strict=True)):
        assert a["prediction"] == b["prediction"], f"food_{i:02d}: {a} vs {b}"
        assert abs(a["probability"] - b["probability"]) <= 1e-4, f"food_{i:02d}: {a} vs {b}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 120, 40)).save(buffer, format="PNG")
    return buffer.getvalue()


def _chunks(total: int, size: int = 16_384) -> Iterator[bytes]:
    for start in range(0, total, size):
        yield b"A" * min(size, total - start)


# (name, how to send it, status, a phrase the message must contain)
BAD_INPUTS: list[tuple[str, Callable[[list[str]], dict[str, Any]], int, str]] = [
    ("invalid base64", lambda s: {"json": {"image": "this is *not* base64!"}}, 400, "not valid base64"),
    ("empty string", lambda s: {"json": {"image": ""}}, 400, "'image' is empty"),
    ("missing field", lambda s: {"json": {"picture": s[0]}}, 422, "missing field 'image'"),
    ("wrong type", lambda s: {"json": {"image": 12345}}, 422, "must be a string"),
    ("list instead of string", lambda s: {"json": {"image": [s[0]]}}, 422, "must be a string"),
    ("extra field", lambda s: {"json": {"image": s[0], "threshold": 0.5}}, 422,
     "unexpected field 'threshold'"),
    ("not an object", lambda s: {"json": [s[0]]}, 422, "must be a JSON object"),
    ("not JSON", lambda s: {"content": b"{image: nope", "headers": {"content-type": "application/json"}},
     422, "not valid JSON"),
    ("no content type", lambda s: {"content": b'{"image": "x"}'}, 422, "Content-Type"),
    ("not an image", lambda s: {"json": {"image": _b64(b"hello, I am a text file, not a photo")}},
     400, "not an image"),
    ("truncated image", lambda s: {"json": {"image": s[0][: len(s[0]) // 2 // 4 * 4]}},
     400, "truncated or corrupt"),
    ("over the pixel limit", lambda s: {"json": {"image": _b64(_png(700, 700))}}, 400,
     f"over the limit of {TEST_MAX_PIXELS} pixels"),
    ("body over the limit", lambda s: {"json": {"image": "A" * (TEST_MAX_BODY_BYTES + 1000)}}, 413,
     f"over the limit of {TEST_MAX_BODY_BYTES} bytes"),
    ("chunked body over the limit", lambda s: {"content": _chunks(TEST_MAX_BODY_BYTES + 50_000),
                                               "headers": {"content-type": "application/json"}},
     413, f"over the limit of {TEST_MAX_BODY_BYTES} bytes"),
]


@pytest.mark.parametrize(("name", "request_kwargs", "status", "phrase"), BAD_INPUTS,
                         ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_gets_a_clear_4xx_and_the_server_keeps_serving(
        service: Service, sample_b64: list[str], name: str,
        request_kwargs: Callable[[list[str]], dict[str, Any]], status: int, phrase: str) -> None:
    response = _predict(service, **request_kwargs(sample_b64))
    assert response.status_code == status, f"{name}: {response.status_code} {response.text[:300]}"
    detail = response.json()["detail"]
    assert isinstance(detail, str) and phrase in detail, f"{name}: {detail!r}"
    after = _predict(service, {"image": sample_b64[1]})
    assert after.status_code == 200, f"server broken after {name}: {after.text}"


def _metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match and ",".join(sorted((match.group(1) or "").split(","))) == wanted:
            return float(match.group(2))
    return 0.0


def test_64_concurrent_requests_all_succeed_and_are_counted(service: Service, sample_b64: list[str]) -> None:
    before = httpx.get(f"{service.url}/metrics", timeout=TIMEOUT_S).text
    with ThreadPoolExecutor(64) as pool:
        statuses = list(pool.map(lambda i: _predict(service, {"image": sample_b64[i % 11]}).status_code,
                                 range(64)))
    assert statuses == [200] * 64
    after = httpx.get(f"{service.url}/metrics", timeout=TIMEOUT_S).text
    ok = {"path": "/predict", "status": "200"}
    assert _metric(after, "http_requests_total", **ok) - _metric(before, "http_requests_total", **ok) == 64
    assert _metric(after, "http_request_duration_seconds_count", path="/predict") >= 64
    assert _metric(after, "inference_batch_size_count") >= 1
    assert "http_requests_in_flight" in after and "http_errors_total" in after
    assert httpx.get(f"{service.url}/health", timeout=TIMEOUT_S).json()["status"] == "ready"


def test_errors_are_counted(service: Service) -> None:
    before = httpx.get(f"{service.url}/metrics", timeout=TIMEOUT_S).text
    assert _predict(service, {"image": ""}).status_code == 400
    after = httpx.get(f"{service.url}/metrics", timeout=TIMEOUT_S).text
    bad = {"path": "/predict", "status": "400"}
    assert _metric(after, "http_errors_total", **bad) == _metric(before, "http_errors_total", **bad) + 1


def test_swagger_docs_with_a_working_example(service: Service) -> None:
    assert httpx.get(f"{service.url}/docs", timeout=TIMEOUT_S).status_code == 200
    schema = httpx.get(f"{service.url}/openapi.json", timeout=TIMEOUT_S).json()
    example = schema["components"]["schemas"]["PredictRequest"]["examples"][0]
    assert _predict(service, example).status_code == 200, "the example body in /docs must work as is"
    # behind the node's Jupyter server (jupyter-server-proxy), the page asks for its schema under the prefix
    proxied = httpx.get(f"{service.url}/docs", headers={"X-Forwarded-Prefix": "/proxy/8000"},
                        timeout=TIMEOUT_S)
    assert "/proxy/8000/openapi.json" in proxied.text


def test_onnx_service_process_has_no_torch(onnx_service: Service, sample_b64: list[str]) -> None:
    _predictions(onnx_service, sample_b64[:2])
    maps = Path(f"/proc/{onnx_service.process.pid}/maps").read_text()
    assert "libtorch" not in maps, "the ONNX service must not load torch"
