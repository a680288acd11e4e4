"""Each backend, through the app, gives the label the backend itself gives.

The app is driven with Flask's test client; the backends are real servers on
127.0.0.1 (uvicorn for FastAPI, the Triton binary for both Triton models).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from flask_app.backends import TITLES

# backend under test → (fixture that starts its server, PREDICT_BACKEND, Triton model or None)
CASES = {
    "fastapi_onnx": ("fastapi_onnx", "fastapi", None),
    "fastapi_pt": ("fastapi_pt", "fastapi", None),
    "triton": ("triton", "triton", "food_classifier"),
    "triton_onnx": ("triton", "triton_onnx", "food_classifier_onnx"),
}


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest, make_client: Callable[..., FlaskClient],
         fastapi_direct: Callable, triton_direct: Callable) -> dict:
    """The app configured for one backend, plus how to ask that backend directly."""
    fixture, backend, model = CASES[request.param]
    server = request.getfixturevalue(fixture)
    if backend == "fastapi":
        client = make_client(backend="fastapi", fastapi_url=server.url, request_timeout=60)
        direct = lambda path: fastapi_direct(server.url, path)  # noqa: E731
    else:
        client = make_client(backend=backend, triton_url=server.url, request_timeout=60)
        direct = lambda path: triton_direct(server.url, model, path)  # noqa: E731
    return {"client": client, "direct": direct, "backend": backend}


def test_app_label_matches_backend(case: dict, samples: list[Path]) -> None:
    client: FlaskClient = case["client"]
    for path in samples:
        expected_label, expected_prob = case["direct"](path)
        response = client.post("/api/predict", data={"file": (path.open("rb"), path.name)})
        assert response.status_code == 200, response.get_data(as_text=True)
        body = response.get_json()
        assert body["prediction"] == expected_label, path.name
        assert body["probability"] == pytest.approx(expected_prob, abs=1e-4), path.name
        assert body["backend"] == case["backend"]
        assert body["elapsed_ms"] > 0


def test_page_fragment_names_label_backend_and_time(case: dict, samples: list[Path]) -> None:
    path = samples[0]
    expected_label, expected_prob = case["direct"](path)
    response = case["client"].post("/predict", data={"file": (path.open("rb"), "dish.jpg")})
    assert response.status_code == 200
    fragment = html.unescape(response.get_data(as_text=True))
    assert expected_label in fragment
    assert f"{expected_prob * 100:.1f}%" in fragment
    assert TITLES[case["backend"]] in fragment
    assert " ms" in fragment


def test_smoke_test_and_health(case: dict) -> None:
    client: FlaskClient = case["client"]
    smoke = client.get("/test")
    assert smoke.status_code == 200, smoke.get_data(as_text=True)
    assert smoke.get_json()["prediction"]
    health = client.get("/health").get_json()
    assert health["status"] == "ok"
    assert health["backend"] == case["backend"]
    assert health["backend_reachable"] is True, health
