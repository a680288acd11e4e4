"""Each backend, through the app, gives the label the backend itself gives.

The app is driven with Flask's test client, and under gunicorn for the
concurrent uploads; the backends are real servers on 127.0.0.1 (uvicorn for
FastAPI, the Triton binary for both Triton models). The page fragment is
checked as the browser gets it: text from a backend arrives escaped.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations
from pathlib import Path

import httpx
import pytest
from flask.testing import FlaskClient
from markupsafe import escape

from flask_app.backends import TITLES
from servelab.core.samples import sample_paths
from servelab.targets.services import start_flask

# backend under test → (fixture that starts its server, PREDICT_BACKEND, Triton model or None)
CASES = {
    "fastapi_onnx": ("fastapi_onnx", "fastapi", None),
    "fastapi_pt": ("fastapi_pt", "fastapi", None),
    "triton": ("triton", "triton", "food_classifier"),
    "triton_onnx": ("triton", "triton_onnx", "food_classifier_onnx"),
}
ROUNDS = 3  # concurrent rounds of all eleven sample photos per backend
TOLERANCE = 1e-4
DISTINCT = 1e-3


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest, make_client: Callable[..., FlaskClient],
         fastapi_direct: Callable, triton_direct: Callable) -> dict:
    """The app configured for one backend, plus how to ask that backend directly."""
    fixture, backend, model = CASES[request.param]
    server = request.getfixturevalue(fixture)
    if backend == "fastapi":
        client = make_client(backend="fastapi", fastapi_url=server.url, request_timeout=60)
        direct = lambda path: fastapi_direct(server.url, path)  # noqa: E731
        env = {"PREDICT_BACKEND": "fastapi", "FASTAPI_SERVER_URL": server.url}
    else:
        client = make_client(backend=backend, triton_url=server.url, request_timeout=60)
        direct = lambda path: triton_direct(server.url, model, path)  # noqa: E731
        env = {"PREDICT_BACKEND": backend, "TRITON_SERVER_URL": server.url}
    return {"client": client, "direct": direct, "backend": backend, "env": env}


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


def test_the_app_on_the_ensemble_answers_as_the_python_backend(make_client: Callable[..., FlaskClient],
                                                               triton: object, triton_direct: Callable,
                                                               samples: list[Path]) -> None:
    """GourmetGram sends the uploaded file's bytes to notebook 12's ensemble: for every sample photo the
    Python backend's class, and its probability within 1e-4."""
    client = make_client(backend="triton_ensemble", triton_url=triton.url, request_timeout=60)  # type: ignore[attr-defined]
    for path in samples:
        expected_label, expected_prob = triton_direct(triton.url, "food_classifier", path)  # type: ignore[attr-defined]
        body = client.post("/api/predict", data={"file": (path.open("rb"), path.name)}).get_json()
        assert (body["prediction"], body["backend"]) == (expected_label, "triton_ensemble"), path.name
        assert body["probability"] == pytest.approx(expected_prob, abs=TOLERANCE), path.name


def test_page_fragment_names_label_backend_and_time(case: dict, samples: list[Path]) -> None:
    path = samples[0]
    expected_label, expected_prob = case["direct"](path)
    response = case["client"].post("/predict", data={"file": (path.open("rb"), "dish.jpg")})
    assert response.status_code == 200
    fragment = response.get_data(as_text=True)  # as the page's script inserts it: no unescaping here
    assert f'id="label">{escape(expected_label)}</p>' in fragment
    assert f'id="probability">{expected_prob * 100:.1f}%</strong>' in fragment
    assert f'id="backend">{escape(TITLES[case["backend"]])}</strong>' in fragment
    assert " ms</strong>" in fragment


def test_smoke_test_and_health(case: dict) -> None:
    client: FlaskClient = case["client"]
    smoke = client.get("/test")
    assert smoke.status_code == 200, smoke.get_data(as_text=True)
    assert smoke.get_json()["prediction"]
    health = client.get("/health").get_json()
    assert health["status"] == "ok"
    assert health["backend"] == case["backend"]
    assert health["backend_reachable"] is True, health


def test_gunicorn_threads_give_each_upload_its_own_answer(case: dict, log_dir: Path, tmp_path: Path) -> None:
    """The eleven sample photos uploaded at once, several rounds: each gets the answer it gets alone.

    gunicorn's threads share one backend client per process (httpx for
    FastAPI, the single-thread tritonclient executor for Triton); an answer
    handed to the wrong thread shows as a wrong label or probability, because
    the photos' answers differ pairwise (checked first).
    """
    photos = sample_paths()
    alone = [case["direct"](path) for path in photos]
    for (i, a), (j, b) in combinations(enumerate(alone), 2):
        assert a[0] != b[0] or abs(a[1] - b[1]) >= DISTINCT, \
            f"{photos[i].name} and {photos[j].name} get the same answer alone: a swap would not show"
    flask = start_flask({**case["env"], "REQUEST_TIMEOUT": "60", "INSTANCE_PATH": str(tmp_path / "instance")},
                        log_dir=log_dir)
    barrier = threading.Barrier(len(photos), timeout=60)
    order = list(range(len(photos)))
    shuffle = random.Random(15)
    try:
        with httpx.Client(base_url=flask.url, timeout=120,
                          limits=httpx.Limits(max_connections=len(photos))) as client:

            def upload(index: int) -> tuple[int, tuple[str, float]]:
                upload = {"file": (photos[index].name, photos[index].read_bytes(), "image/jpeg")}
                barrier.wait()  # all uploads leave together, so gunicorn's threads overlap
                response = client.post("/api/predict", files=upload)
                assert response.status_code == 200, response.text
                body = response.json()
                assert body["backend"] == case["backend"]
                return index, (body["prediction"], float(body["probability"]))

            with ThreadPoolExecutor(len(photos)) as pool:
                for round_no in range(1, ROUNDS + 1):
                    shuffle.shuffle(order)
                    got = dict(pool.map(upload, order))
                    wrong = [f"{photos[i].name}: alone {alone[i]}, concurrent {got[i]}" for i in order
                             if got[i][0] != alone[i][0] or abs(got[i][1] - alone[i][1]) > TOLERANCE]
                    assert not wrong, f"round {round_no}, answers not matched to their uploads:\n" + \
                        "\n".join(wrong)
    finally:
        flask.stop()
    assert len(list((tmp_path / "instance" / "uploads").iterdir())) == ROUNDS * len(photos)


@pytest.mark.parametrize("where", ["label", "error"])
def test_markup_from_the_backend_arrives_escaped(make_client: Callable[..., FlaskClient], fake_fastapi,
                                                 markup: dict[str, str], samples: list[Path],
                                                 where: str) -> None:
    """A label or an error text holding markup is sent as text (the browser test checks the page too)."""
    if where == "error":
        fake_fastapi.status, fake_fastapi.body = 500, {"detail": markup["error"]}
    client = make_client(backend="fastapi", fastapi_url=fake_fastapi.url, request_timeout=10)
    response = client.post("/predict", data={"file": (samples[0].open("rb"), "dish.jpg")})
    assert response.status_code == (200 if where == "label" else 503), response.get_data(as_text=True)
    fragment = response.get_data(as_text=True)
    assert str(escape(markup[where])) in fragment
    for tag in ("<img", "<b>", "<script"):
        assert tag not in fragment, f"{tag} reached the page as markup:\n{fragment}"
    api = client.post("/api/predict", data={"file": (samples[0].open("rb"), "dish.jpg")})
    text = api.get_json()["prediction" if where == "label" else "error"]
    assert markup[where] in text, "the JSON API carries the text as it is (JSON is not HTML)"
