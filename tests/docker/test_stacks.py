"""Every stack up on a real engine, through the notebooks' own ComposeStack, answering real requests."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import httpx
import pytest

from servelab.core.labels import CLASSES
from servelab.core.paths import REPO_ROOT
from servelab.targets.docker import ComposeStack
from tests.docker.conftest import ARTIFACTS, lab
from tests.docker.engine import Engine, checkout_owner

SAMPLE = REPO_ROOT / "data" / "samples" / "food_00.jpg"


def predict_fastapi(url: str) -> dict[str, object]:
    payload = {"image": base64.b64encode(SAMPLE.read_bytes()).decode("ascii")}
    response = httpx.post(f"{url}/predict", json=payload, timeout=120)
    assert response.status_code == 200, response.text
    return dict(response.json())


def upload_to_gourmetgram(stack: ComposeStack) -> str:
    """An upload through the page's own endpoint (the form posts to /predict); the label it shows."""
    with SAMPLE.open("rb") as image:
        response = httpx.post(f"{stack.url('flask')}/predict", timeout=120,
                              files={"file": ("dish.jpg", image, "image/jpeg")})
    assert response.status_code == 200, response.text
    shown = [label for label in CLASSES if label in response.text]
    assert shown, f"GourmetGram's answer names no class: {response.text[:500]}"
    return shown[0]


@pytest.mark.parametrize("app", ["fastapi_pt", "fastapi_onnx"])
def test_fastapi_answers_and_gourmetgram_uploads_through_it(stack: ComposeStack, app: str) -> None:
    assert not stack.has_gpu, "this engine has no NVIDIA runtime: the stacks must run on the CPU"
    stack.up("fastapi", fastapi_app=app, timeout=300)
    answer = predict_fastapi(stack.url("fastapi_server"))
    assert answer["prediction"] in CLASSES and 0 < float(str(answer["probability"])) <= 1
    assert upload_to_gourmetgram(stack) == answer["prediction"]


def test_triton_serves_both_models_and_gourmetgram_calls_each(stack: ComposeStack) -> None:
    from tests.integration.flask_app.conftest import _triton_direct

    stack.up("triton", timeout=300)
    address = stack.url("triton_server").split("://", 1)[1]
    for model in ("food_classifier", "food_classifier_onnx"):
        ready = httpx.get(f"{stack.url('triton_server')}/v2/models/{model}/ready", timeout=30)
        assert ready.status_code == 200, f"{model} is not ready: {ready.text}"
        label, probability = _triton_direct(address, model, SAMPLE)
        assert label in CLASSES and 0 < probability <= 1
    config = json.loads(httpx.get(f"{stack.url('triton_server')}/v2/models/food_classifier/config",
                                  timeout=30).text)
    assert {group["kind"] for group in config["instance_group"]} == {"KIND_CPU"}, config["instance_group"]
    # model control answers only the lab's key: a load without it is refused, the lab's own reload works
    triton = stack.url("triton_server")
    refused = httpx.post(f"{triton}/v2/repository/models/food_classifier/load", timeout=30)
    assert refused.status_code == 403 and "admin-key" in refused.text, refused.text
    stack.reload_model("food_classifier")
    assert httpx.get(f"{triton}/v2/models/food_classifier/ready", timeout=30).status_code == 200
    for backend in ("triton", "triton_onnx"):
        stack.up("triton", ["flask"], flask_backend=backend, timeout=300)
        assert upload_to_gourmetgram(stack) in CLASSES


def test_the_llm_engine_streams_a_completion(images: dict[str, float]) -> None:
    from servelab.llm.server import EngineOptions, start_engine_compose

    engine = start_engine_compose(EngineOptions(), timeout=300)
    try:
        chunks = []
        body = {"model": engine.model, "prompt": "The dish is", "max_tokens": 8, "stream": True}
        with httpx.stream("POST", f"{engine.url}/v1/completions", json=body, timeout=120) as response:
            assert response.status_code == 200
            chunks = [line for line in response.iter_lines() if line.startswith("data: {")]
        assert len(chunks) >= 2, f"not a stream: {chunks}"
    finally:
        engine.stop()


def jupyter(engine: Engine, *argv: str) -> str:
    done = engine.docker("compose", "-p", "servelab-jupyter", "-f", "docker/docker-compose-jupyter.yaml",
                         "exec", "-T", "jupyter", *argv, timeout=300, check=False,
                         extra_env=jupyter_env())
    assert done.returncode == 0, f"{' '.join(argv)} in the Jupyter container: {done.stderr[-2000:]}"
    return done.stdout


def jupyter_env() -> dict[str, str]:
    uid, gid = checkout_owner()
    return {"HOST_UID": str(uid), "HOST_GID": str(gid),
            "DOCKER_GID": str(os.stat(os.environ["DOCKER_SOCKET"]).st_gid),
            "SERVELAB_CHECKOUT": str(REPO_ROOT)}


@pytest.fixture(scope="module")
def jupyter_url(engine: Engine, images: dict[str, float]) -> str:
    """``./lab jupyter``, as a user starts it; its URL (the last line it prints: no token in it)."""
    text = lab("jupyter", log=ARTIFACTS / "lab-jupyter.log", timeout=900).stdout
    urls = re.findall(r"^jupyter: (https://\S+)$", text, re.M)
    assert urls, text[-2000:]
    token = (REPO_ROOT / ".jupyter-token").read_text().strip()
    assert token and token not in text
    return urls[-1]


def jupyter_token() -> str:
    return (REPO_ROOT / ".jupyter-token").read_text().strip()


def tls_client() -> httpx.Client:
    """The Jupyter server's own certificate, made on this host, is the one trusted (not the system's)."""
    import ssl

    context = ssl.create_default_context(cafile=str(REPO_ROOT / ".jupyter-tls" / "cert.pem"))
    context.check_hostname = False  # the certificate names no host: its fingerprint is what a student checks
    return httpx.Client(verify=context, timeout=30)


def test_the_jupyter_container_drives_the_engine_and_writes_as_the_owner(engine: Engine,
                                                                         jupyter_url: str) -> None:
    token = jupyter_token()
    with tls_client() as client:
        status = client.get("https://localhost:8888/api/status", params={"token": token})
        assert status.status_code == 200, status.text
    with tls_client() as stranger:  # a client of its own: the first one holds the login cookie now
        assert stranger.get("https://localhost:8888/api/status").status_code == 403  # no token, no way in
    assert "JUPYTER_TOKEN=" not in jupyter(engine, "env"), "the token in the kernels' environment"
    assert "servelab-jupyter" in jupyter(engine, "docker", "compose", "ls", "--all")
    assert jupyter(engine, "sh", "-c", "test -x ./lab && pwd").strip() == str(REPO_ROOT)
    probe = REPO_ROOT / "results" / ".owner-probe"
    try:
        jupyter(engine, "touch", str(probe))
        assert (probe.stat().st_uid, probe.stat().st_gid) == checkout_owner()
    finally:
        probe.unlink(missing_ok=True)


def test_a_stack_switch_never_stops_the_kernel(engine: Engine, jupyter_url: str) -> None:
    """FastAPI -> Triton (both on port 8000), asked from inside the Jupyter container, as notebooks do; in
    between, FastAPI's Swagger page through the Jupyter server's proxy (jupyter-server-proxy)."""
    token = jupyter_token()
    api = "https://localhost:8888/api/kernels"
    client = tls_client()
    kernel = client.post(api, params={"token": token}, json={"name": "servelab"}, timeout=60).json()["id"]
    started = engine.docker("inspect", "--format", "{{.State.StartedAt}}", "servelab-jupyter").stdout
    up = "from servelab.targets.docker import ComposeStack; s = ComposeStack(); s.up('{}', timeout=300)"
    try:
        jupyter(engine, "python", "-c", up.format("fastapi"))
        # the browser reaches FastAPI's Swagger page (loopback only) through this Jupyter, behind its token
        docs = client.get("https://localhost:8888/proxy/8000/docs", params={"token": token})
        assert docs.status_code == 200 and "/proxy/8000/openapi.json" in docs.text, docs.text[:500]
        spec = client.get("https://localhost:8888/proxy/8000/openapi.json", params={"token": token})
        assert spec.status_code == 200 and "/predict" in spec.json()["paths"]
        with tls_client() as stranger:  # no token (nor the login cookie the first client holds)
            assert stranger.get("https://localhost:8888/proxy/8000/docs").status_code in (302, 403)
        jupyter(engine, "python", "-c", up.format("triton") + "; s.down()")
        assert client.get(f"{api}/{kernel}", params={"token": token}).status_code == 200
        now = engine.docker("inspect", "--format", "{{.State.StartedAt}}", "servelab-jupyter").stdout
        assert now == started, "the Jupyter container restarted"
    finally:
        client.delete(f"{api}/{kernel}", params={"token": token})
        client.close()


def not_owned(root: Path) -> list[str]:
    uid = checkout_owner()[0]
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [s for s in subfolders if s not in (".git", ".venv")]
        found += [str(Path(folder, name)) for name in [*subfolders, *files]
                  if Path(folder, name).lstat().st_uid != uid]
    return found
