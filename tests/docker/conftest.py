"""The docker tier (``./lab test --docker``; .ci/run runs it after ``./lab test``).

One Docker engine for the session (its own unless ``DOCKER_HOST`` names one: tests/docker/engine.py),
the stand-in base images, and every image built by the users' own command (``./lab images``)
before any test; the engine the tier started is stopped at the end. Build logs and figures go to
test-artifacts/docker/.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.paths import REPO_ROOT
from servelab.targets.docker import ComposeStack
from tests.docker.engine import Engine, build_standins, say

ARTIFACTS = REPO_ROOT / "test-artifacts" / "docker"
PROJECTS = ("servelab-fastapi", "servelab-triton", "servelab-llm", "servelab-jupyter")
IMAGES = ("servelab/jupyter:latest", "servelab/fastapi_pt:latest", "servelab/fastapi_onnx:latest",
          "servelab/gourmetgram:latest", "servelab/triton:24.10", "servelab/llm:latest")
VLLM_IMAGE = "servelab/vllm:latest"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test keeps the suite's 600 s limit for itself; the session's set-up (engine, stand-ins,
    a cold ``./lab images``: ten minutes and more on 2 cores) has its own limits inside the fixtures."""
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(600, func_only=True))


def build_vllm() -> bool:
    """vLLM's image is built too unless SERVELAB_BUILD_VLLM=0 (it runs only on GPUs of 7.0 to 9.0)."""
    return os.environ.get("SERVELAB_BUILD_VLLM", "1") != "0"


@pytest.fixture(scope="session", autouse=True)
def engine() -> Iterator[Engine]:
    saved = dict(os.environ)
    os.environ.pop("SERVELAB_DOCKER_GPU", None)  # the tier asks its engine, as users' paths do
    started = time.monotonic()
    engine = Engine.start()
    os.environ.update(engine.env)
    os.environ["DOCKER_SOCKET"] = engine.socket
    try:
        if engine.owned:  # an interrupted run's containers would hold the ports, its leftovers the disk
            for project in PROJECTS:
                engine.docker("compose", "-p", project, "down", "--timeout", "10", timeout=300, check=False)
            engine.reclaim()
        build_standins(engine)
        say(f"engine and stand-in bases ready in {time.monotonic() - started:.0f} s")
        yield engine
    finally:
        for project in PROJECTS:
            engine.docker("compose", "-p", project, "down", "--timeout", "10", timeout=300, check=False)
        if engine.owned:  # each rebuild leaves the image it replaced untagged: tens of GB over a few runs
            engine.reclaim()
        engine.stop()
        os.environ.clear()
        os.environ.update(saved)


def lab(*args: str, log: Path, timeout: float,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``./lab ARGS`` from the checkout, its output kept in ``log`` (and its tail in a failure)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        done = subprocess.run(["./lab", *args], cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout, check=False, env={**os.environ, **(env or {})})
    text = log.read_text(errors="replace")
    assert done.returncode == 0, \
        f"./lab {' '.join(args)} failed ({done.returncode}); last lines:\n{text[-4000:]}"
    return subprocess.CompletedProcess(done.args, done.returncode, text, "")


@pytest.fixture(scope="session")
def images(engine: Engine) -> dict[str, float]:
    """Every image built with ``./lab images``; returns name -> size in MB (also in images.json)."""
    started = time.monotonic()
    lab("images", log=ARTIFACTS / "images-build.log", timeout=3600,
        env={"SERVELAB_BUILD_VLLM": "1" if build_vllm() else "0"})
    say(f"./lab images: {time.monotonic() - started:.0f} s")
    sizes = {}
    for name in (*IMAGES, *((VLLM_IMAGE,) if build_vllm() else ())):
        done = engine.docker("image", "inspect", "--format", "{{.Size}}", name, check=False)
        assert done.returncode == 0, f"./lab images did not build {name}"
        sizes[name] = round(int(done.stdout) / 1e6)
    (ARTIFACTS / "images.json").write_text(json.dumps(sizes, indent=1))
    return sizes


@pytest.fixture
def stack(images: dict[str, float]) -> Iterator[ComposeStack]:
    """The notebooks' own stack object on the tier's engine; every stack is down afterwards."""
    stack = ComposeStack()
    yield stack
    stack.down()
